//! [`Core`]: the engine's state as commands see it (keyspace, configuration,
//! statistics, the AOF, the client registries) and its background work
//! (`background.rs`: the AOF switched on and off, SAVE/BGSAVE, rewrites).
//!
//! This layer sits below the commands and above the files
//! (ARCHITECTURE.md, "Layers"): it knows nothing of the command table.

mod acl_file;
mod background;
pub mod clients;
pub(crate) mod evict;
pub(crate) mod failover;
pub mod functions;
pub(crate) mod migrate;
pub(crate) mod monitor;
pub(crate) mod notify;
pub(crate) mod pause;
pub(crate) use pause::{PauseMode, PausePurpose};
pub(crate) mod repl;
mod repl_sync;
pub(crate) mod replica_expire;
mod session;
pub(crate) mod stats_calls;
pub(crate) mod stats_clock;
pub(crate) mod stats_hist;
pub(crate) mod stats_latency;
pub(crate) mod stats_slowlog;
pub(crate) mod sync_load;
pub(crate) mod tracking;
pub(crate) mod upstream;

use std::any::Any;
use std::sync::Arc;

use crate::clock::now_ms;
use crate::config::Config;
use crate::keyspace::Keyspace;
use crate::persist::aof::{Effect, LoadReport};
use crate::persist::io::Io;
use crate::persist::lock::DirLock;
use crate::persist::rewriter::RewriteState;
use crate::persist::saver::SaveState;
use crate::persist::writer::AofWriter;
use crate::rand::Rng;

pub use session::{MultiState, Session};

/// Counters reported by INFO stats.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Commands executed.
    pub commands_processed: u64,
    /// Keys removed because their TTL passed.
    pub expired_keys: u64,
    /// Keys removed by `maxmemory` eviction.
    pub evicted_keys: u64,
    /// Successful key lookups.
    pub keyspace_hits: u64,
    /// Errors a replica answered to its master's commands
    /// (`unexpected_error_replies`).
    pub unexpected_error_replies: u64,
    /// Failed key lookups.
    pub keyspace_misses: u64,
    /// Connections accepted (server).
    pub connections_received: u64,
    /// Connections refused by `maxclients` (server).
    pub rejected_connections: u64,
    /// Bytes read from clients (server).
    pub net_input_bytes: u64,
    /// Bytes written to clients (server).
    pub net_output_bytes: u64,
    /// Socket reads (server).
    pub reads_processed: u64,
    /// Socket writes (server).
    pub writes_processed: u64,
    /// Clients written to in turns shared with the I/O threads (server,
    /// `io-threads` above 1; Redis's count).
    pub io_threaded_writes_processed: u64,
    /// Whether the last turn with replies to send shared them with the
    /// I/O threads (INFO `io_threads_active`).
    pub io_threads_active: bool,
}

/// The engine's state, reachable by commands through [`Ctx::core`](crate::command::Ctx::core).
pub struct Core {
    /// The databases.
    pub(crate) keyspace: Keyspace,
    /// Configuration in force.
    pub(crate) config: Config,
    /// Statistics.
    pub(crate) stats: Stats,
    /// Per-command and error statistics, slowlog, latency monitor,
    /// instantaneous rates (docs/observability.md).
    pub(crate) observe: stats_calls::Observe,
    /// ACL users (`crate::acl`); the default user's password follows
    /// `requirepass` ([`Core::sync_requirepass`]).
    pub(crate) acl: crate::acl::Users,
    /// Random source for RANDOMKEY, SPOP, sampling.
    pub(crate) rng: Rng,
    /// Eviction's pool and out-of-memory state (`evict.rs`).
    pub(crate) evict: evict::EvictState,
    /// Effects logged and not yet taken by the persistence layer.
    pub(crate) effects: Vec<Effect>,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub(crate) dirty: u64,
    /// Unix ms when the engine started.
    pub(crate) start_ms: i64,
    /// True while the AOF is being replayed: no lazy expiry, nothing logged.
    pub(crate) loading: bool,
    /// The files read at startup, while a thread loads them
    /// (`Engine::begin_open`): commands without Redis's `loading` flag are
    /// refused with -LOADING, INFO shows `loading:1`, and no background
    /// work runs.
    pub(crate) startup_load: Option<sync_load::SyncLoad>,
    /// The append-only file, when `appendonly yes`.
    pub(crate) aof: Option<AofWriter>,
    /// What loading the AOF found at startup.
    pub(crate) aof_load: Option<LoadReport>,
    /// Blocked clients, WATCHed keys and Pub/Sub subscriptions.
    pub(crate) clients: clients::Clients,
    /// Snapshot (SAVE/BGSAVE) status and the BGSAVE in progress.
    pub(crate) save: SaveState,
    /// AOF rewrite status and the rewrite in progress.
    pub(crate) rewrite: RewriteState,
    /// The Lua state and script cache, created by the first script
    /// command (taken out while a script runs).
    pub(crate) scripting: ScriptSlot,
    /// The function libraries' sources (Redis Functions): persistent data.
    pub(crate) functions: functions::Libraries,
    /// The compiled function libraries (`script::functions`), rebuilt from
    /// `functions` when its generation moves; taken out while one runs.
    pub(crate) function_engine: ScriptSlot,
    /// The script or function running now (FUNCTION STATS while busy).
    pub(crate) script_run: ScriptRun,
    /// The file-system layer every persistence file goes through.
    pub(crate) io: Arc<dyn Io>,
    /// Held while the engine uses the data directory.
    pub(crate) dir_lock: Option<DirLock>,
    pub(crate) next_session_id: u64,
    /// Replication ids and offsets, the stream and the replicas.
    pub(crate) repl: repl::ReplState,
    /// The replication capture in progress (a full sync's payload).
    pub(crate) repl_sync: Option<repl_sync::ReplSync>,
    /// When the engine's cron last ran (Unix ms).
    pub(crate) last_cron_ms: i64,
    /// Unix time from the statistics clock's readings (a command's first
    /// reading gives its time too).
    pub(crate) wall: crate::core::stats_clock::WallClock,
    /// The master this server follows, when a replica.
    pub(crate) replica: upstream::ReplicaRole,
    /// Keys its clients gave a TTL on a writable replica
    /// (`replica_expire.rs`).
    pub(crate) replica_expires: replica_expire::ReplicaExpires,
    /// Client pauses in force (CLIENT PAUSE, a shutdown waiting for its
    /// replicas).
    pub(crate) pauses: pause::Pauses,
    /// A FAILOVER in progress.
    pub(crate) failover: Option<failover::Failover>,
    /// While a shutdown waits for its replicas: until when (Unix ms; INFO
    /// `shutdown_in_milliseconds`).
    pub(crate) shutdown_deadline_ms: Option<i64>,
    /// Client-side caching: the invalidation table, BCAST prefixes and
    /// every tracking client's mode.
    pub(crate) tracking: tracking::Tracking,
    /// The clients in MONITOR mode (`monitor.rs`).
    pub(crate) monitors: monitor::Monitors,
    /// MIGRATE's cached connections to its targets (`migrate.rs`).
    pub(crate) migrate_sockets: migrate::MigrateSockets,
    /// The switches DEBUG sets for tests (`DEBUG SET-ACTIVE-EXPIRE` …).
    pub(crate) debug: DebugSwitches,
}

/// Test switches set by DEBUG subcommands (Redis keeps them in `server`).
#[derive(Debug, Clone, Copy)]
pub struct DebugSwitches {
    /// `DEBUG SET-ACTIVE-EXPIRE`: the cron expires keys in the background
    /// (true by default).
    pub active_expire: bool,
    /// `DEBUG PAUSE-CRON`: the cron does nothing while set.
    pub pause_cron: bool,
    /// `DEBUG SET-DISABLE-DENY-SCRIPTS`: scripts may call commands flagged
    /// `noscript`.
    pub allow_noscript_in_scripts: bool,
    /// `DEBUG SET-SKIP-CHECKSUM-VALIDATION`: RESTORE accepts a payload
    /// whose CRC does not match.
    pub skip_checksum_validation: bool,
    /// `DEBUG LOADAOF` ran: the engine reloads the dataset from the AOF
    /// after the command (engine/load_aof.rs).
    pub load_aof: bool,
}

impl Default for DebugSwitches {
    fn default() -> DebugSwitches {
        DebugSwitches {
            active_expire: true,
            pause_cron: false,
            allow_noscript_in_scripts: false,
            skip_checksum_validation: false,
            load_aof: false,
        }
    }
}

impl Core {
    /// The RDB value encoder the configuration asks for (`rdbcompression`,
    /// `list-max-listpack-size`): SAVE with `snapshot-format rdb`, an RDB
    /// AOF preamble and DUMP use it.
    pub(crate) fn rdb_encoder(&self) -> crate::rdb::writer::Encoder {
        crate::rdb::writer::Encoder {
            compress: self.config.rdbcompression,
            list_max_listpack_size: self.config.limits.list_max_listpack_size,
            key_access: self.key_access_record(crate::clock::now_ms()),
        }
    }

    /// What SAVE and BGSAVE write (`snapshot-format`, `rdbchecksum`).
    pub(crate) fn save_format(&self) -> crate::persist::saver::Format {
        match self.config.snapshot_format {
            crate::config::SnapshotFormat::Native => crate::persist::saver::Format::Native,
            crate::config::SnapshotFormat::Rdb => crate::persist::saver::Format::Rdb {
                encoder: self.rdb_encoder(),
                checksum: self.config.rdbchecksum,
            },
        }
    }

    /// The file SAVE and BGSAVE write: `dbfilename`, except that with
    /// `snapshot-format rdb` and the default `dump.hoz` it is `dump.rdb`.
    pub(crate) fn snapshot_file_name(&self) -> String {
        match self.config.snapshot_format {
            crate::config::SnapshotFormat::Rdb if self.config.dbfilename == "dump.hoz" => {
                "dump.rdb".into()
            }
            _ => self.config.dbfilename.clone(),
        }
    }

    /// A new client session (a fresh id; authenticated unless a password
    /// is required).
    pub(crate) fn new_session(&mut self) -> Session {
        let id = self.next_session_id;
        self.next_session_id += 1;
        let authenticated = self.acl.default_needs_no_auth();
        Session::new(id, authenticated, now_ms())
    }

    /// Gives the default user `requirepass` as its only password, or
    /// `nopass` without one (Redis's `ACLUpdateDefaultUserPassword`, run
    /// when the setting is loaded or changed).
    pub(crate) fn sync_requirepass(&mut self) {
        let password = self.config.requirepass.clone();
        self.acl.set_default_password(password.as_deref());
    }
    /// The MISCONF error writes get while the AOF cannot be written.
    pub(crate) fn write_refusal(&self) -> Option<String> {
        if self.config.stop_writes_on_bgsave_error
            && !self.config.save.is_empty()
            && !self.save.last_bgsave_ok
        {
            return Some(BGSAVE_ERROR.to_string());
        }
        self.aof.as_ref().and_then(AofWriter::refusal)
    }

    /// Redis's `checkGoodReplicasStatus`: with `min-replicas-to-write` and
    /// `min-replicas-max-lag` both set, writes are refused while fewer
    /// replicas are online with an ACK at most max-lag seconds old.
    pub(crate) fn noreplicas_refusal(&self) -> Option<&'static str> {
        let settings = &self.config.repl;
        if self.replica.is_replica()
            || settings.min_replicas_to_write == 0
            || settings.min_replicas_max_lag_s == 0
        {
            return None;
        }
        (self
            .repl
            .good_replicas(now_ms(), settings.min_replicas_max_lag_s)
            < settings.min_replicas_to_write)
            .then_some(NOREPLICAS)
    }

    /// Called for every modified key: invalidates WATCHes on it and wakes
    /// clients blocked on it.
    pub(crate) fn signal_modified(&mut self, db: usize, key: &[u8]) {
        let keyspace = &self.keyspace;
        self.clients
            .key_touched(db, key, || keyspace.db(db).get(key).is_some());
        if self.tracking.active() {
            self.tracking.invalidate(&mut self.clients, key, true);
        }
    }

    /// [`Core::signal_modified`] for a key deleted because its TTL passed
    /// (Redis's signalModifiedKey with no client: BCAST NOLOOP clients are
    /// told even when their own command found the key expired).
    pub(crate) fn signal_expired(&mut self, db: usize, key: &[u8]) {
        let client = self.tracking.take_modifier();
        self.signal_modified(db, key);
        self.tracking.restore_modifier(client);
    }

    /// Client-side caching after a flush (FLUSHALL, FLUSHDB, a replica's
    /// full sync): every tracking client is told everything changed.
    pub(crate) fn tracking_flush(&mut self) {
        self.tracking.flush(&mut self.clients);
    }

    /// WATCHes and blocked clients after database `db`'s contents were
    /// replaced (SWAPDB, a full sync's dataset): `was_there` tells whether
    /// a key existed before (Redis's touchAllWatchedKeysInDb and
    /// scanDatabaseForReadyKeys).
    pub(crate) fn signal_db_replaced(
        &mut self,
        db: usize,
        was_there: impl Fn(&[u8]) -> bool,
        now_ms: i64,
    ) {
        let database = self.keyspace.db(db);
        for key in self.clients.watched_keys_in(db) {
            let is_there = database.get(&key).is_some();
            let now_expired = is_there && database.is_expired(&key, now_ms);
            self.clients
                .touch_watched_replaced(db, &key, was_there(&key), is_there, now_expired);
        }
        for key in self.clients.blocked_keys_in(db) {
            if database.get(&key).is_some() {
                self.clients.mark_ready(db, &key);
            }
        }
    }

    /// Removes `key` from database `db` if its TTL has passed at `now_ms`,
    /// as Redis's expireIfNeeded: the DEL is logged (the caller logs the
    /// unit), `expired_keys` counted, the `expired` event sent, watchers
    /// and trackers told. Nothing expires while the log is replayed (the
    /// log says when keys were deleted), on a replica (its master's DEL
    /// comes) or while writes are paused (reads skip such keys). Returns
    /// true when the key was removed.
    pub(crate) fn expire_if_needed(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        !self.expiry_held() && self.delete_if_past_ttl(db, key, now_ms)
    }

    /// [`Core::expire_if_needed`] for a client's write on a writable
    /// replica, where expiry is otherwise held: the key is deleted (the DEL
    /// logged and sent to sub-replicas) unless writes are paused.
    pub(crate) fn expire_on_writable_replica(
        &mut self,
        db: usize,
        key: &[u8],
        now_ms: i64,
    ) -> bool {
        !self.pauses.writes_paused() && self.delete_if_past_ttl(db, key, now_ms)
    }

    /// Deletes `key` when its TTL has passed at `now_ms` (never while
    /// loading); true when it did.
    fn delete_if_past_ttl(&mut self, db: usize, key: &[u8], now_ms: i64) -> bool {
        if self.loading || !self.keyspace.db(db).is_expired(key, now_ms) {
            return false;
        }
        self.delete_expired(db, key);
        true
    }

    /// Deletes `key`, whose TTL has passed, as Redis's deleteExpiredKey
    /// does: counted, logged and propagated as DEL, the `expired` event,
    /// WATCHes and trackers told.
    fn delete_expired(&mut self, db: usize, key: &[u8]) {
        self.keyspace.db_mut(db).remove(key);
        self.stats.expired_keys += 1;
        self.effects.push(Effect {
            db,
            argv: vec![b"DEL".to_vec(), key.to_vec()],
        });
        self.notify(notify::EXPIRED, "expired", db, key);
        self.signal_expired(db, key);
    }

    /// Replaces the whole dataset with `keyspace` (DEBUG RELOAD, DEBUG
    /// LOADAOF). Captures of the old data are stopped: a BGSAVE and a
    /// replica sync end, a running AOF rewrite ends and is scheduled again
    /// (its image would be of the old data). WATCHes and blocked clients
    /// see the change as after SWAPDB; trackers are told everything
    /// changed.
    pub(crate) fn replace_keyspace(&mut self, keyspace: Keyspace, now_ms: i64) {
        self.save.abort(&mut self.keyspace);
        self.abort_repl_sync();
        if self.rewrite.in_progress() {
            self.rewrite.abort(&mut self.keyspace);
            self.rewrite.scheduled = true;
        }
        let old = std::mem::replace(&mut self.keyspace, keyspace);
        for db in 0..self.keyspace.db_count() {
            let before = old.db(db);
            self.signal_db_replaced(db, |key| before.get(key).is_some(), now_ms);
        }
        self.tracking_flush();
    }

    /// Active expiry: samples keys with a TTL in every database and removes
    /// expired ones, like Redis's `activeExpireCycle` (20 keys a sample,
    /// repeated while more than a quarter were expired, bounded by a time
    /// budget of 25 ms so a cycle never stalls clients for long).
    pub(crate) fn active_expire_cycle(&mut self, now_ms: i64) -> usize {
        const SAMPLE: usize = 20;
        const BUDGET_US: u128 = 25_000;
        let started = std::time::Instant::now();
        let mut removed_total = 0;
        for db in 0..self.keyspace.db_count() {
            loop {
                let database = self.keyspace.db(db);
                if database.expires_len() == 0 {
                    break;
                }
                let expired = database.sample_expired(&mut self.rng, SAMPLE, now_ms);
                for key in &expired {
                    self.delete_expired(db, key);
                }
                removed_total += expired.len();
                if expired.len() * 4 <= SAMPLE || started.elapsed().as_micros() > BUDGET_US {
                    break;
                }
            }
            if started.elapsed().as_micros() > BUDGET_US {
                break;
            }
        }
        removed_total
    }
}

/// Redis's refusal of a write without enough good replicas.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis's refusal while `stop-writes-on-bgsave-error` applies.
pub(crate) const BGSAVE_ERROR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// What [`ScriptRun::current`] reports: the function's name (None for a
/// script), its command, its start (Unix ms).
pub type RunningNow<'a> = (Option<&'a str>, &'a [Vec<u8>], i64);

/// The script or function in execution, as FUNCTION STATS reports it.
/// Its buffers are kept from run to run: recording a call allocates
/// nothing once they have grown.
#[derive(Debug, Clone, Default)]
pub struct ScriptRun {
    /// A script or function is running.
    running: bool,
    /// The function's name; None for EVAL and friends.
    function: Option<Arc<str>>,
    /// The command that runs it (FCALL and its arguments): the first
    /// `argc` entries.
    argv: Vec<Vec<u8>>,
    argc: usize,
    /// When it started (Unix ms).
    start_ms: i64,
}

impl ScriptRun {
    /// Records the start of a run: a function (with the command that
    /// calls it) or a script (`function` None, no command kept).
    pub fn start(&mut self, function: Option<Arc<str>>, argv: &[&[u8]], start_ms: i64) {
        self.running = true;
        self.start_ms = start_ms;
        self.argc = 0;
        if function.is_some() {
            for (i, arg) in argv.iter().enumerate() {
                match self.argv.get_mut(i) {
                    Some(slot) => {
                        slot.clear();
                        slot.extend_from_slice(arg);
                    }
                    None => self.argv.push(arg.to_vec()),
                }
            }
            self.argc = argv.len();
        }
        self.function = function;
    }

    /// Records the end of the run.
    pub fn end(&mut self) {
        self.running = false;
        self.function = None;
    }

    /// The running function's name, command and start (Unix ms); None
    /// when nothing runs. A script has no name and no command.
    pub fn current(&self) -> Option<RunningNow<'_>> {
        self.running.then(|| {
            (
                self.function.as_deref(),
                &self.argv[..self.argc],
                self.start_ms,
            )
        })
    }
}

/// Where [`Core`] keeps the Lua state (`script::Scripting`, a type of the
/// command layer above this one): created by the first script command,
/// taken out while a script runs. Holding it type-erased keeps this layer
/// free of imports from the scripting code.
#[derive(Default)]
pub struct ScriptSlot(Option<Box<dyn Any + Send>>);

impl ScriptSlot {
    /// Takes the state out (None when there is none yet, or it is out).
    pub fn take<T: Any + Send>(&mut self) -> Option<Box<T>> {
        let state = self.0.take()?;
        match state.downcast::<T>() {
            Ok(state) => Some(state),
            Err(other) => {
                self.0 = Some(other);
                None
            }
        }
    }

    /// Puts the state (back) in.
    pub fn put<T: Any + Send>(&mut self, state: Box<T>) {
        self.0 = Some(state);
    }

    /// The state, when it is in.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        self.0.as_ref()?.downcast_ref::<T>()
    }

    /// The state, mutably, when it is in.
    pub fn get_mut<T: Any + Send>(&mut self) -> Option<&mut T> {
        self.0.as_mut()?.downcast_mut::<T>()
    }
}
