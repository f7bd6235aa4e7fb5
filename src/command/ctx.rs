//! [`Ctx`]: what a command sees while it executes.

use super::CmdResult;
use crate::core::clients::BlockRequest;
use crate::core::notify;
use crate::core::Core;
pub use crate::core::Session;
use crate::keyspace::Db;
pub use crate::persist::aof::Effect;
use crate::reply::Reply;
use crate::types::{Blob, Hash, List, Set, Stream, Value, ZSet, WRONGTYPE};

/// The socket-level facts about a connection that CLIENT LIST, CLIENT KILL
/// and INFO clients report (the engine-level ones are in [`Session`]).
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// Peer address as Redis prints it (`127.0.0.1:50312`, `[::1]:50312`).
    pub addr: String,
    /// Local address the client connected to.
    pub laddr: String,
    /// File descriptor.
    pub fd: i64,
    /// Unix ms of the last request received (CLIENT LIST `idle=`).
    pub last_interaction_ms: i64,
    /// Bytes received and not yet executed (`qbuf=`).
    pub query_buffer_bytes: usize,
    /// Spare capacity of the input buffer (`qbuf-free=`).
    pub query_buffer_free_bytes: usize,
    /// Bytes of replies not yet written (`omem=`).
    pub output_bytes: usize,
    /// Total memory attributed to the connection (`tot-mem=`).
    pub total_bytes: usize,
    /// Events the server waits for: `r`, or `rw` while output is pending.
    pub events: &'static str,
    /// Connected over the Unix socket (CLIENT LIST flag `U`).
    pub unix: bool,
}

/// What the surrounding program (the server, or nothing for an embedded
/// engine) offers to commands that reach beyond one client: CLIENT LIST and
/// KILL, SHUTDOWN, INFO clients.
pub trait Host {
    /// Number of connected clients, replicas left out (INFO
    /// `connected_clients`).
    fn connected_clients(&self) -> usize {
        1
    }

    /// Asks the host to stop after this command (SHUTDOWN with
    /// `options`); the caller gets no reply unless the shutdown fails.
    /// Returns false when there is no process to stop (an embedded
    /// engine).
    fn request_shutdown(&mut self, _options: super::ShutdownOptions) -> bool {
        false
    }

    /// SHUTDOWN ABORT: cancels a shutdown in progress. False when none is.
    fn abort_shutdown(&mut self) -> bool {
        false
    }

    /// The calling client's connection, when it has one.
    fn connection(&self) -> Option<Connection> {
        None
    }

    /// Calls `f` for every other client, in connection order.
    fn for_each_client(&self, _f: &mut dyn FnMut(&Session, &Connection)) {}

    /// Closes every other client for which `pred` is true, once its
    /// pending replies are written (CLIENT KILL). Returns how many.
    fn kill_clients(&mut self, _pred: &mut dyn FnMut(&Session, &Connection) -> bool) -> usize {
        0
    }

    /// Ends the wait of the blocked client `id` (CLIENT UNBLOCK): with its
    /// timeout reply, or with the UNBLOCKED error. False when no such
    /// client is blocked.
    fn unblock_client(&mut self, _id: u64, _with_error: bool) -> bool {
        false
    }

    /// Applies a configuration change made by CONFIG SET to what the host
    /// owns (listening sockets, logging). An error rolls the change back
    /// and is reported to the client.
    fn apply_config(
        &mut self,
        _old: &crate::config::Config,
        _new: &crate::config::Config,
    ) -> Result<(), String> {
        Ok(())
    }

    /// The process's allocated memory (INFO `used_memory`), when the host
    /// counts it.
    fn used_memory(&self) -> Option<MemoryUse> {
        None
    }

    /// Writes a line to the host's log (SHUTDOWN's reasons).
    fn log(&self, _level: crate::config::LogLevel, _message: &str) {}

    /// Called again and again while a script runs past
    /// `busy-reply-threshold`: the host answers its other clients in the
    /// meantime (`-BUSY` to most commands, as Redis does; the commands
    /// allowed while busy, such as MULTI or WATCH, run on `core`) and
    /// reports what they asked for: SCRIPT KILL (the host replies
    /// `-UNKILLABLE` itself when `busy.wrote`) or SHUTDOWN NOSAVE. An
    /// embedded engine has no other clients: the script goes on.
    fn while_busy(&mut self, _busy: &BusyScript, _core: &mut Core) -> BusyAction {
        BusyAction::Continue
    }
}

/// What the host is told about a script that is running too long.
#[derive(Debug, Clone, Copy)]
pub struct BusyScript {
    /// The script has run a write command: SCRIPT KILL is refused.
    pub wrote: bool,
    /// It is a function (FCALL): FUNCTION KILL stops it, not SCRIPT KILL.
    pub function: bool,
}

impl BusyScript {
    /// What other clients get meanwhile (Redis's `slowevalerr` or
    /// `slowscripterr`).
    pub fn busy_error(&self) -> &'static str {
        if self.function {
            crate::command::functions::BUSY_FUNCTION_ERR
        } else {
            crate::command::functions::BUSY_EVAL_ERR
        }
    }
}

/// What another client asked for while a script was busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyAction {
    /// Nothing: the script goes on.
    Continue,
    /// SCRIPT KILL (already answered OK by the host; only when the script
    /// has not written).
    Kill,
    /// SHUTDOWN NOSAVE: stop the script; the host exits after it.
    ShutdownNoSave,
}

/// Memory the process has allocated, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryUse {
    /// Allocated now.
    pub used: u64,
    /// Most allocated at once so far.
    pub peak: u64,
    /// Allocated when the server became ready (INFO `used_memory_startup`).
    pub startup: u64,
    /// The allocator's name (INFO `mem_allocator`: `jemalloc-5.3.0`,
    /// `libc`).
    pub allocator: &'static str,
}

/// The host of an embedded engine: no other clients, no process to stop.
#[derive(Debug, Default)]
pub struct NullHost;

impl Host for NullHost {}

/// The context of one command execution.
pub struct Ctx<'a> {
    /// Engine state: keyspace, configuration, statistics.
    pub core: &'a mut Core,
    /// The calling client.
    pub session: &'a mut Session,
    /// The host (server or embedding program).
    pub host: &'a mut dyn Host,
    /// The time the command started, Unix ms. Redis uses one time for a
    /// whole command so that expiry decisions are consistent within it.
    pub now_ms: i64,
    /// Set when the handler logged its own effects (no default logging).
    pub(crate) logged_custom: bool,
    /// Keyspace changes made by this command (`server.dirty` delta).
    pub(crate) dirty: u64,
    /// Blocking is not allowed (inside MULTI/EXEC, a script, or replay):
    /// a command that would block answers its timeout reply at once.
    pub(crate) deny_blocking: bool,
    /// Set when the command runs again because this key, which it waits
    /// on, received data: it serves from this key only (Redis 7.0 serves a
    /// blocked client from the key that became ready).
    pub(crate) ready_key: Option<Blob>,
    /// The command asked to block ([`Ctx::block`]).
    pub(crate) block_request: Option<BlockRequest>,
    /// The command runs inside EXEC.
    pub(crate) in_exec: bool,
    /// The command runs from a script (redis.call).
    pub(crate) in_script: bool,
}

macro_rules! typed_access {
    ($read:ident, $write:ident, $variant:ident, $ty:ty) => {
        /// The value under `key` if it has this type; WRONGTYPE otherwise.
        pub fn $read(&mut self, key: &[u8]) -> Result<Option<&$ty>, Reply> {
            match self.lookup_read(key) {
                None => Ok(None),
                Some(Value::$variant(v)) => Ok(Some(v)),
                Some(_) => Err(Reply::err(WRONGTYPE)),
            }
        }

        /// The value under `key` mutably if it has this type; WRONGTYPE
        /// otherwise.
        pub fn $write(&mut self, key: &[u8]) -> Result<Option<&mut $ty>, Reply> {
            match self.lookup_write(key) {
                None => Ok(None),
                Some(Value::$variant(v)) => Ok(Some(v)),
                Some(_) => Err(Reply::err(WRONGTYPE)),
            }
        }
    };
}

impl<'a> Ctx<'a> {
    /// A context for one command.
    pub fn new(
        core: &'a mut Core,
        session: &'a mut Session,
        host: &'a mut dyn Host,
        now_ms: i64,
    ) -> Self {
        Ctx {
            core,
            session,
            host,
            now_ms,
            logged_custom: false,
            dirty: 0,
            deny_blocking: false,
            ready_key: None,
            block_request: None,
            in_exec: false,
            in_script: false,
        }
    }

    /// True when the command may block. False inside MULTI/EXEC, scripts
    /// and AOF replay, where a command that would block answers as if its
    /// timeout had passed (call [`Ctx::block`] anyway: it does that).
    pub fn may_block(&self) -> bool {
        !self.deny_blocking && !self.core.loading
    }

    /// When the command runs again because a key it waits on became
    /// ready: that key. The command serves from it alone (and blocks again
    /// with [`Ctx::block`] if it still cannot be served).
    pub fn ready_key(&self) -> Option<&[u8]> {
        self.ready_key.as_deref()
    }

    /// Blocks the client on `request.keys` (in the selected database) until
    /// one of them receives data of `request.kind`, the deadline passes, or
    /// the client is unblocked. Returns the reply to return from the
    /// handler: nothing is sent while blocked; where blocking is not
    /// allowed ([`Ctx::may_block`] is false) it is the timeout reply.
    pub fn block(&mut self, request: BlockRequest) -> CmdResult {
        if !self.may_block() {
            return Ok(request.timeout_reply);
        }
        self.block_request = Some(request);
        Ok(Reply::NullArray)
    }

    /// Parses a blocking timeout argument into an absolute deadline (Unix
    /// ms), or None for 0 (wait forever), as Redis's
    /// `getTimeoutFromObjectOrReply`: seconds may be fractional and are
    /// rounded up to the millisecond; milliseconds must be an integer.
    pub fn parse_block_timeout(&self, arg: &[u8], in_seconds: bool) -> Result<Option<i64>, Reply> {
        let timeout_ms: i64 = if in_seconds {
            // Acceptance is `strtold`'s (string2ld); the value fits a double
            // for every timeout that is not out of range anyway.
            if crate::types::long_double::Ld::parse(arg).is_none() {
                return Err(Reply::err("ERR timeout is not a float or out of range"));
            }
            let seconds = crate::types::num::parse_f64_any_range(arg).unwrap_or(f64::INFINITY);
            let ms = (seconds * 1000.0).ceil();
            if ms.is_finite() && ms.abs() < 9.2e18 {
                ms as i64
            } else {
                // Redis converts with a C cast, which on x86-64 gives
                // LLONG_MIN for anything out of range: "timeout is negative".
                i64::MIN
            }
        } else {
            crate::types::num::parse_i64(arg)
                .ok_or_else(|| Reply::err("ERR timeout is not an integer or out of range"))?
        };
        if timeout_ms < 0 {
            return Err(Reply::err("ERR timeout is negative"));
        }
        if timeout_ms == 0 {
            return Ok(None);
        }
        Ok(Some(self.now_ms.saturating_add(timeout_ms)))
    }

    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        let index = self.session.db;
        self.core.keyspace.db_mut(index)
    }

    /// Index of the selected database.
    pub fn db_index(&self) -> usize {
        self.session.db
    }

    /// The encoding thresholds in force.
    pub fn limits(&self) -> crate::types::EncodingLimits {
        self.core.config.limits
    }

    /// Removes `key` from database `db` if its TTL has passed, logging a DEL
    /// (as Redis propagates lazy expiry). Returns true when it was removed.
    pub fn expire_if_needed_in(&mut self, db: usize, key: &[u8]) -> bool {
        self.core.expire_if_needed(db, key, self.now_ms)
    }

    /// [`Ctx::expire_if_needed_in`] for the selected database.
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        let db = self.session.db;
        self.expire_if_needed_in(db, key)
    }

    /// [`Ctx::expire_if_needed`] before a write: on a writable replica a
    /// client's write also deletes a key whose TTL has passed (Redis's
    /// `EXPIRE_FORCE_DELETE_EXPIRED` for write lookups there), where a read
    /// only sees it as absent.
    pub fn expire_if_needed_for_write(&mut self, key: &[u8]) -> bool {
        let db = self.session.db;
        if !self.session.is_master && self.core.writable_replica() {
            return self.core.expire_on_writable_replica(db, key, self.now_ms);
        }
        self.expire_if_needed_in(db, key)
    }

    /// The live value under `key` for reading (counts a keyspace hit or miss).
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup_read_notifying(key, true)
    }

    /// [`Ctx::lookup_read`] without the "keymiss" event (Redis's
    /// `LOOKUP_NONOTIFY`: OBJECT; or a key the command looked up already).
    pub fn lookup_read_quiet(&mut self, key: &[u8]) -> Option<&Value> {
        self.lookup_read_notifying(key, false)
    }

    fn lookup_read_notifying(&mut self, key: &[u8], notify_miss: bool) -> Option<&Value> {
        self.expire_if_needed(key);
        let db = self.session.db;
        let hidden = self
            .core
            .hidden_expired(self.session.is_master, db, key, self.now_ms);
        // Found and touched in one probe (Redis's lookupKey updates the
        // access clock or LFU counter of every key it finds).
        let found = !hidden && self.core.touch(db, key, self.now_ms);
        if !found {
            self.core.stats.keyspace_misses += 1;
            if notify_miss {
                self.core.notify(notify::KEY_MISS, "keymiss", db, key);
            }
            return None;
        }
        self.core.stats.keyspace_hits += 1;
        self.core.keyspace.db(db).get(key)
    }

    /// The live value under `key` for writing (no hit/miss statistics).
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.expire_if_needed_for_write(key);
        let toucher = self.core.toucher(self.now_ms);
        self.db().get_mut_touching(key, |a| toucher.apply(a))
    }

    /// [`Ctx::lookup_read`] that leaves the key's access clock as it is
    /// (Redis's `LOOKUP_NOTOUCH`: EXISTS, TYPE, TTL; OBJECT, which also
    /// passes `LOOKUP_NONOTIFY`: `notify_miss` false).
    pub fn lookup_read_notouch(&mut self, key: &[u8], notify_miss: bool) -> Option<&Value> {
        self.expire_if_needed(key);
        let db = self.session.db;
        let hidden = self
            .core
            .hidden_expired(self.session.is_master, db, key, self.now_ms);
        if hidden || !self.core.keyspace.db(db).contains(key) {
            self.core.stats.keyspace_misses += 1;
            if notify_miss {
                self.core.notify(notify::KEY_MISS, "keymiss", db, key);
            }
            return None;
        }
        self.core.stats.keyspace_hits += 1;
        self.core.keyspace.db(db).get(key)
    }

    /// True when `key` exists and has not expired (no statistics).
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.expire_if_needed(key);
        let db = self.session.db;
        if self
            .core
            .hidden_expired(self.session.is_master, db, key, self.now_ms)
        {
            return false;
        }
        self.db().contains(key)
    }

    typed_access!(read_list, write_list, List, Box<List>);
    typed_access!(read_hash, write_hash, Hash, Box<Hash>);
    typed_access!(read_set, write_set, Set, Box<Set>);
    typed_access!(read_zset, write_zset, ZSet, Box<ZSet>);
    typed_access!(read_stream, write_stream, Stream, Box<Stream>);

    /// Stores `value` under `key` (SET semantics: the TTL is removed unless
    /// `keep_ttl`), and signals the modification.
    pub fn set_key(&mut self, key: &[u8], value: Value, keep_ttl: bool) {
        self.expire_if_needed_for_write(key);
        let created = self.core.notifies(notify::NEW) && !self.db().contains(key);
        self.db().set(key, value, keep_ttl);
        if created {
            self.notify_new(key);
        }
        self.signal_modified(key);
    }

    /// Reports keyspace event `event` of `class` on `key` in the selected
    /// database ([`Core::notify`]).
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.session.db;
        self.core.notify(class, event, db, key);
    }

    /// Reports the creation of `key` in the selected database (the "new"
    /// event, Redis's `dbAdd`).
    pub fn notify_new(&mut self, key: &[u8]) {
        self.notify(notify::NEW, "new", key);
    }

    /// Deletes `key` (with the "del" event); true when it existed (and
    /// had not expired).
    pub fn delete_key(&mut self, key: &[u8]) -> bool {
        if self.expire_if_needed(key) {
            return false;
        }
        let removed = self.db().remove(key).is_some();
        if removed {
            self.signal_modified(key);
            self.notify(notify::GENERIC, "del", key);
        }
        removed
    }

    /// After `removed` elements left the collection at `key` (and the
    /// command reported its event): deletes the key if the collection is
    /// now empty ("del"), signals the key as modified and
    /// counts `removed` changes.
    pub fn elements_removed(&mut self, key: &[u8], removed: u64) {
        self.delete_if_empty(key);
        self.signal_modified(key);
        self.dirty(removed);
    }

    /// Deletes `key` when its collection became empty (Redis never keeps
    /// empty lists, hashes, sets or sorted sets), with the "del" event.
    /// Returns true if deleted.
    pub fn delete_if_empty(&mut self, key: &[u8]) -> bool {
        let empty = match self.db().get(key) {
            Some(Value::List(l)) => l.is_empty(),
            Some(Value::Hash(h)) => h.is_empty(),
            Some(Value::Set(s)) => s.is_empty(),
            Some(Value::ZSet(z)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.db().remove(key);
            self.notify(notify::GENERIC, "del", key);
        }
        empty
    }

    /// Absolute expiry of `key` in Unix ms, if any.
    pub fn expire_at(&mut self, key: &[u8]) -> Option<i64> {
        self.db().expire_at(key)
    }

    /// Whether an expiry at `at_ms` means deleting the key now (Redis's
    /// `checkAlreadyExpired`): never on a replica, where the key is kept
    /// with its past TTL until the master's DEL.
    pub fn already_expired(&self, at_ms: i64) -> bool {
        at_ms <= self.now_ms && !self.core.replica.is_replica()
    }

    /// Sets `key`'s absolute expiry.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) -> bool {
        let set = self.db().set_expire(key, at_ms);
        if set {
            self.signal_modified(key);
            let db = self.session.db;
            self.core.note_expire_set(self.session.is_master, db, key);
        }
        set
    }

    /// Removes the TTL of `key`; true when it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        self.db().remove_expire(key)
    }

    /// Records that `n` changes were made to the keyspace (Redis's
    /// `server.dirty`). A command with changes and no [`Ctx::log`] call is
    /// logged as received.
    pub fn dirty(&mut self, n: u64) {
        self.dirty += n;
    }

    /// Logs `argv` as (one of) this command's effects in the selected
    /// database, replacing the default of logging the command as received.
    pub fn log(&mut self, argv: Vec<Vec<u8>>) {
        let db = self.session.db;
        self.log_in(db, argv);
    }

    /// [`Ctx::log`] for an explicit database (MOVE, COPY … DB).
    pub fn log_in(&mut self, db: usize, argv: Vec<Vec<u8>>) {
        self.logged_custom = true;
        self.core.effects.push(Effect { db, argv });
    }

    /// Suppresses the default logging of this command (its effects were
    /// logged some other way, or it must not be logged).
    pub fn log_nothing(&mut self) {
        self.logged_custom = true;
    }

    /// Signals that `key` in the selected database was modified (WATCH).
    pub fn signal_modified(&mut self, key: &[u8]) {
        let db = self.session.db;
        self.core.signal_modified(db, key);
    }

    /// A random number source.
    pub fn rng(&mut self) -> &mut crate::rand::Rng {
        &mut self.core.rng
    }
}
