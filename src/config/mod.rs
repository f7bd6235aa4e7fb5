//! Engine and server configuration, with Redis's parameter names.
//!
//! One table ([`PARAMS`]) defines every parameter once: its name (and the
//! old name Redis still accepts, e.g. `hash-max-ziplist-entries`), its type
//! and bounds, its default, and whether CONFIG SET may change it. The same
//! table serves the configuration file (redis.conf syntax), the
//! `--name value` command-line flags (turned into configuration lines the
//! way `redis-server` does), CONFIG GET and CONFIG SET, so the four can
//! never disagree about names, defaults or error messages.
//!
//! Values that need a feature hozon does not have are accepted by the
//! parser but
//! refused by [`Config::check_supported`], which the server runs at startup
//! and CONFIG SET runs before applying: such settings are refused loudly,
//! never silently ignored.
//!
//! The module's files: `mod.rs` the [`Config`] struct, its value types and
//! `rename-command`; `params.rs` the parameter table and each parameter's
//! parsing and validation; `load.rs` configuration files, command-line
//! flags and the startup refusals; `ops.rs` the operations settings
//! (Unix socket, pid file, syslog, supervision) and the Redis directives
//! accepted without effect.

pub mod acl;
mod load;
pub mod notify;
pub mod ops;
mod ops_params;
mod params;
mod replica;
mod rewrite;
#[cfg(test)]
mod tests;
pub mod tls;

use std::path::{Path, PathBuf};

use crate::types::num::parse_i64;
use crate::types::EncodingLimits;

pub use load::{cat_repr, os_error_text, ConfigError, Invocation};
use params::default_args;
pub use params::{
    lookup, trim_double, Kind, LoadState, Param, SpecialSetter, Unsupported, HIDDEN, IMMUTABLE,
    MAXMEMORY_POLICIES, MULTI_ARG, PARAMS, PROTECTED,
};
pub use replica::{DisklessLoad, ReplicaSettings};
pub use rewrite::{rewrite_content, rewrite_file, SIGNATURE as REWRITE_SIGNATURE};

/// `enable-debug-command` (and Redis's other protected actions): refused.
pub const PROTECTED_NO: usize = 0;
/// `enable-debug-command yes`: allowed.
pub const PROTECTED_YES: usize = 1;
/// `enable-debug-command local`: allowed from loopback and Unix sockets.
pub const PROTECTED_LOCAL: usize = 2;

/// Redis's `memtoull` (`1gb`, `64k`, plain bytes); None when malformed.
pub fn parse_memory(s: &[u8]) -> Option<u64> {
    params::memtoull(s).and_then(|n| u64::try_from(n).ok())
}

/// Severity threshold of the log (`loglevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// `debug`: everything.
    Debug,
    /// `verbose`: connection events and more.
    Verbose,
    /// `notice`: what an operator wants to see (default).
    Notice,
    /// `warning`: only problems and lifecycle events.
    Warning,
}

/// `appendfsync` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFsync {
    /// fsync before every reply.
    Always,
    /// fsync once a second.
    Everysec,
    /// leave flushing to the OS.
    No,
}

/// `aof-preamble`: what starts a rewritten append-only file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AofPreamble {
    /// A native snapshot image (`dump.hoz`), the fastest to load.
    Native,
    /// No image: commands that recreate every key (Redis loads the file).
    None,
    /// An RDB image (version 10): Redis 7.0+ loads the whole file.
    Rdb,
}

/// `snapshot-format`: what SAVE and BGSAVE write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotFormat {
    /// `dump.hoz`, hozon's native snapshot (the default).
    Native,
    /// Redis's RDB (version 10), `dump.rdb` unless `dbfilename` is set.
    Rdb,
}

/// One `save <seconds> <changes>` point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavePoint {
    /// Seconds since the last save.
    pub seconds: u64,
    /// Changes since the last save.
    pub changes: u64,
}

/// Configuration of an [`Engine`](crate::Engine) and of the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// `databases`: number of numbered databases (16).
    pub databases: usize,
    /// `dir`: the data directory (`./data`).
    pub dir: PathBuf,
    /// `dbfilename`: the snapshot file name (`dump.hoz`).
    pub dbfilename: String,
    /// `appendonly`: log every write to the append-only file (`yes`).
    pub appendonly: bool,
    /// `appendfilename`: the append-only file name (`appendonly.aof`).
    pub appendfilename: String,
    /// `appendfsync`: when the append-only file is fsynced (`everysec`).
    pub appendfsync: AppendFsync,
    /// `save`: snapshot points (`3600 1 300 100 60 10000`).
    pub save: Vec<SavePoint>,
    /// `aof-load-truncated`: load an append-only file with a torn tail (`yes`).
    pub aof_load_truncated: bool,
    /// `auto-aof-rewrite-percentage`: rewrite when the AOF grew by this
    /// percentage since the last rewrite (100; 0 = never automatically).
    pub auto_aof_rewrite_percentage: u32,
    /// `auto-aof-rewrite-min-size`: no automatic rewrite below this size
    /// (64mb).
    pub auto_aof_rewrite_min_size: u64,
    /// `no-appendfsync-on-rewrite`: skip AOF fsyncs while a background save
    /// or rewrite runs (`no`).
    pub no_appendfsync_on_rewrite: bool,
    /// `aof-rewrite-incremental-fsync`: fsync the rewritten file every
    /// 32 MiB while writing it (`yes`).
    pub aof_rewrite_incremental_fsync: bool,
    /// `aof-preamble`: the image a rewrite starts the file with (`native`).
    pub aof_preamble: AofPreamble,
    /// `stop-writes-on-bgsave-error`: refuse writes after a failed snapshot (`yes`).
    pub stop_writes_on_bgsave_error: bool,
    /// `snapshot-format`: `native` (`dump.hoz`) or `rdb` (`dump.rdb`).
    pub snapshot_format: SnapshotFormat,
    /// `rdbcompression`: LZF-compress strings in RDB files and DUMP
    /// payloads (`yes`).
    pub rdbcompression: bool,
    /// `rdbchecksum`: write the CRC-64 at the end of RDB files (`yes`).
    pub rdbchecksum: bool,
    /// `requirepass`: the password clients must AUTH with, if any.
    pub requirepass: Option<Vec<u8>>,
    /// `hz`: background task frequency (10 per second), kept within 1..=500.
    pub hz: u32,
    /// `*-max-listpack-*` and `set-max-intset-entries`.
    pub limits: EncodingLimits,
    /// `proto-max-bulk-len`: largest bulk string accepted (512 MB).
    pub proto_max_bulk_len: u64,
    /// `hll-sparse-max-bytes`: the longest sparse HyperLogLog string
    /// (header included) before it converts to dense (3000).
    pub hll_sparse_max_bytes: u64,
    /// `bind`: addresses the server listens on (`127.0.0.1`); a leading
    /// `-` marks an address that may be unavailable; `*` is every IPv4
    /// interface and `::*` every IPv6 one.
    pub bind: Vec<String>,
    /// `port`: TCP port (6379).
    pub port: u16,
    /// `protected-mode`: refuse non-loopback clients when no password is set.
    pub protected_mode: bool,
    /// `maxclients`: most simultaneous clients (10000).
    pub maxclients: u64,
    /// `timeout`: close clients idle this many seconds (0 = never).
    pub timeout_s: u64,
    /// `tcp-keepalive`: TCP keepalive period in seconds (300).
    pub tcp_keepalive_s: u64,
    /// `client-query-buffer-limit`: largest unprocessed input per client (1 GB).
    pub client_query_buffer_limit: u64,
    /// `loglevel` (`notice`).
    pub loglevel: LogLevel,
    /// `logfile`: log destination; empty = standard output.
    pub logfile: String,
    /// `daemonize`: detach from the terminal (double fork) once started.
    pub daemonize: bool,
    /// `maxmemory`: memory limit in bytes, 0 for none (docs/memory.md).
    pub maxmemory: u64,
    /// `maxmemory-policy`: eviction policy, an index into
    /// [`MAXMEMORY_POLICIES`] (no effect while `maxmemory` is 0).
    pub maxmemory_policy: usize,
    /// `enable-debug-command`: [`PROTECTED_NO`] (the default),
    /// [`PROTECTED_YES`] or [`PROTECTED_LOCAL`] (loopback and Unix-socket
    /// clients only).
    pub enable_debug_command: usize,
    /// `stream-node-max-entries`: entries per stream node before XADD
    /// starts a new one (100; 0 = no limit).
    pub stream_node_max_entries: u64,
    /// `stream-node-max-bytes`: bytes per stream node before XADD starts a
    /// new one (4096; 0 = no limit).
    pub stream_node_max_bytes: u64,
    /// `maxmemory-samples` (5): keys sampled per eviction pool refill.
    pub maxmemory_samples: u32,
    /// `maxmemory-eviction-tenacity` (10): how long one eviction run may take.
    pub maxmemory_eviction_tenacity: u32,
    /// `lfu-log-factor` (10).
    pub lfu_log_factor: u64,
    /// `lfu-decay-time` (1 minute).
    pub lfu_decay_time: u64,
    /// `replica-ignore-maxmemory` (yes): a replica does not evict.
    pub replica_ignore_maxmemory: bool,
    /// `busy-reply-threshold` (alias `lua-time-limit`): ms before a script
    /// counts as busy (5000).
    pub busy_reply_threshold_ms: u64,
    /// `key-load-delay` (a test setting, as in Redis): microseconds slept
    /// after each key a load inserts (a negative `-n` sleeps 1 µs once in
    /// `n` keys), so tests can watch a load in progress.
    pub key_load_delay: i32,
    /// `rdb-key-save-delay` (a test setting, as in Redis): microseconds per
    /// key a BGSAVE, AOF rewrite or replication capture takes at least (a
    /// negative `-n`: 1 µs per `n` keys), so tests can act while one runs.
    /// A change applies to a capture already running.
    pub rdb_key_save_delay: i32,
    /// `loading-process-events-interval-bytes` (Redis's test setting: how
    /// often a loading Redis answers clients). Accepted and shown; hozon
    /// answers them throughout a load, which runs on a thread of its own.
    pub loading_process_events_interval_bytes: i32,
    /// `busy-poll-us` (hozon only): how long the event loop keeps polling
    /// for new requests before it sleeps, after turns whose requests came
    /// close together (0, the default: always sleep at once). See
    /// `server::busy_poll`.
    pub busy_poll_us: u64,
    /// `io-threads`: threads writing the replies of a busy turn, the
    /// command thread included (1, the default: the command thread alone;
    /// docs/cores.md).
    pub io_threads: usize,
    /// `notify-keyspace-events`: the keyspace notification classes in
    /// force ([`notify`]'s flags; 0, the default: none).
    pub notify_keyspace_events: u32,
    /// `tracking-table-max-keys`: the most keys client-side caching's
    /// invalidation table holds (0: no limit).
    pub tracking_table_max_keys: u64,
    /// `slowlog-log-slower-than`: microseconds from which a command is
    /// logged in the slowlog (negative: off; 0: every command).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`: entries the slowlog keeps.
    pub slowlog_max_len: u64,
    /// `acllog-max-len`: entries ACL LOG keeps.
    pub acllog_max_len: u64,
    /// `latency-monitor-threshold`: milliseconds from which an event is
    /// sampled by the latency monitor (0: off).
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command latency histograms (INFO
    /// latencystats, LATENCY HISTOGRAM).
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: the percentiles INFO
    /// latencystats prints.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// The configuration file the server was started with, if any (INFO
    /// `config_file`).
    pub config_file: Option<PathBuf>,
    /// `client-output-buffer-limit normal …` (0 0 0: none). Kept and shown;
    /// replies to a client's own commands are not cut off.
    pub normal_output_limit: OutputLimit,
    /// `client-output-buffer-limit replica …` (256mb 64mb 60): a replica
    /// whose unsent stream exceeds it is disconnected.
    pub replica_output_limit: OutputLimit,
    /// Replication as master (docs/replication.md).
    pub repl: ReplSettings,
    /// `repl-diskless-sync` (yes): full syncs send the payload straight to
    /// the replicas' sockets.
    pub repl_diskless_sync: bool,
    /// `repl-disable-tcp-nodelay` (no).
    pub repl_disable_tcp_nodelay: bool,
    /// `client-output-buffer-limit pubsub …` (32mb 8mb 60): a subscriber
    /// whose unread messages exceed it is disconnected.
    pub pubsub_output_limit: OutputLimit,
    /// `rename-command` lines of the configuration file: the names clients
    /// reach commands by (configuration file and flags only, as in Redis).
    pub command_renames: CommandRenames,
    /// Replication as replica (docs/replication.md §5.1).
    pub replica: ReplicaSettings,
    /// Unix socket, pid file, syslog, supervision, and the directives
    /// accepted without effect ([`ops`]).
    pub ops: ops::OpsSettings,
    /// `aclfile`, `acl-pubsub-default` and the `user` lines ([`acl`]).
    pub acl: acl::AclSettings,
    /// The `tls-*` settings ([`tls`]).
    pub tls: tls::TlsSettings,
}

/// The replication settings with numbers (Redis 7.0's names, ranges and
/// defaults; docs/replication.md §2.4, §3.3, §3.4, §3.7).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplSettings {
    /// `repl-diskless-sync-delay` (5): seconds a diskless sync waits for
    /// more replicas.
    pub diskless_sync_delay_s: u64,
    /// `repl-diskless-sync-max-replicas` (0: no limit): start at once when
    /// this many wait.
    pub diskless_sync_max_replicas: u64,
    /// `repl-backlog-size` (1mb).
    pub backlog_size: u64,
    /// `repl-backlog-ttl` (3600): seconds without replicas before the
    /// backlog is freed (0: never).
    pub backlog_ttl_s: u64,
    /// `repl-ping-replica-period` (10): seconds between the stream's PINGs.
    pub ping_replica_period_s: u64,
    /// `repl-timeout` (60).
    pub timeout_s: u64,
    /// `min-replicas-to-write` (0: off).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag` (10).
    pub min_replicas_max_lag_s: u64,
    /// `shutdown-timeout` (10): seconds a shutdown waits for lagging
    /// replicas to catch up (0: it does not wait).
    pub shutdown_timeout_s: u64,
}

/// What `rename-command` did to the names clients use (Redis edits its
/// command table; hozon keeps the table and translates names at the door,
/// so the AOF, replay and the command metadata keep the real names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRenames {
    /// Lower-case client-visible name → the command it reaches (`Some`)
    /// or nothing (`None`: renamed away, or renamed to `""`). Names not
    /// listed reach the command of that name.
    names: Vec<(Vec<u8>, Option<&'static str>)>,
}

/// The command names `rename-command` checks against. The configuration
/// sits below the command layer (ARCHITECTURE.md, "Layers"), so the
/// loader is given the names rather than importing the command table;
/// the engine supplies them ([`Config::apply_text`], [`Config::from_args`]).
pub trait CommandCatalog {
    /// The real (lower-case) name of the command `name` names, if hozon
    /// has it (`name` in any case, no renames applied).
    fn real_name(&self, name: &[u8]) -> Option<&'static str>;
    /// True when `name` (lower case) is a Redis 7.0 command, whether or
    /// not hozon has it.
    fn known_to_redis(&self, name: &str) -> bool;
    /// Checks a `user` line's rules for user `name` as ACL SETUSER would
    /// apply them, and returns them with selectors written over several
    /// words joined; the error is what the configuration loader reports
    /// (Redis's `Error in user declaration …`).
    fn check_user(&self, name: &[u8], rules: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        let _ = name;
        Ok(rules.to_vec())
    }
}

/// How a client's command name resolves under `rename-command`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandName {
    /// Not renamed: the name is looked up as usual.
    Unchanged,
    /// A new name: it stands for this command (its real, lower-case name).
    Renamed(&'static str),
    /// The command was renamed away or disabled: unknown to clients.
    Removed,
}

impl CommandRenames {
    /// True when no command was renamed (the common case, checked first on
    /// every command).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// What `name` stands for.
    pub fn resolve(&self, name: &[u8]) -> CommandName {
        match self
            .names
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            None => CommandName::Unchanged,
            Some((_, Some(real))) => CommandName::Renamed(real),
            Some((_, None)) => CommandName::Removed,
        }
    }

    /// The real command `name` reaches, if any (renames applied).
    fn target(&self, name: &[u8], commands: &dyn CommandCatalog) -> Option<&'static str> {
        match self.resolve(name) {
            CommandName::Renamed(real) => Some(real),
            CommandName::Removed => None,
            CommandName::Unchanged => commands.real_name(name),
        }
    }

    /// Redis's `rename-command <from> <to>`: the command `from` reaches is
    /// reached by `to` instead (by no name when `to` is empty). Renames
    /// chain (`a b` then `b c`). The errors are Redis's. A Redis 7.0
    /// command hozon does not have (DEBUG, MODULE, ACL, …) is unknown
    /// under any name already: renaming it is accepted and changes
    /// nothing, so a redis.conf that disables it loads. `commands` tells
    /// which commands exist.
    pub fn rename(
        &mut self,
        from: &[u8],
        to: &[u8],
        commands: &dyn CommandCatalog,
    ) -> Result<(), String> {
        let Some(real) = self.target(from, commands) else {
            let lower = String::from_utf8_lossy(from).to_ascii_lowercase();
            let redis_only = self.resolve(from) == CommandName::Unchanged
                && !lower.contains('|')
                && commands.known_to_redis(&lower);
            if redis_only {
                return Ok(());
            }
            return Err("No such command in rename-command".into());
        };
        if !to.is_empty() && self.target(to, commands).is_some() {
            return Err("Target command name already exists".into());
        }
        self.set(from, None);
        if !to.is_empty() {
            self.set(to, Some(real));
        }
        Ok(())
    }

    fn set(&mut self, name: &[u8], target: Option<&'static str>) {
        let name = name.to_ascii_lowercase();
        match self.names.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = target,
            None => self.names.push((name, target)),
        }
    }

    /// True when clients reach the command named `real` by some name
    /// (COMMAND COUNT, COMMAND LIST and COMMAND without arguments show
    /// only those).
    pub fn reachable(&self, real: &str) -> bool {
        self.resolve(real.as_bytes()) == CommandName::Unchanged
            || self.names.iter().any(|(_, t)| *t == Some(real))
    }
}

/// One class of `client-output-buffer-limit`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Disconnect at once at this many bytes of pending output (0: never).
    pub hard_bytes: u64,
    /// Disconnect when over this many bytes for `soft_seconds` (0: never).
    pub soft_bytes: u64,
    /// How long the soft limit may be exceeded.
    pub soft_seconds: u64,
}

impl Default for Config {
    /// The documented defaults (the table's), as a newcomer's server gets
    /// them. Note that they include persistence (`appendonly yes` and save
    /// points), which [`Config::check_supported`] refuses until it exists.
    fn default() -> Self {
        let mut config = Config {
            databases: 0,
            dir: PathBuf::new(),
            dbfilename: String::new(),
            appendonly: false,
            appendfilename: String::new(),
            appendfsync: AppendFsync::Everysec,
            save: Vec::new(),
            aof_load_truncated: false,
            auto_aof_rewrite_percentage: 0,
            auto_aof_rewrite_min_size: 0,
            no_appendfsync_on_rewrite: false,
            aof_rewrite_incremental_fsync: false,
            aof_preamble: AofPreamble::Native,
            stop_writes_on_bgsave_error: false,
            snapshot_format: SnapshotFormat::Native,
            rdbcompression: true,
            rdbchecksum: true,
            requirepass: None,
            hz: 0,
            limits: EncodingLimits::default(),
            proto_max_bulk_len: 0,
            hll_sparse_max_bytes: 0,
            bind: Vec::new(),
            port: 0,
            protected_mode: false,
            maxclients: 0,
            timeout_s: 0,
            tcp_keepalive_s: 0,
            client_query_buffer_limit: 0,
            loglevel: LogLevel::Notice,
            logfile: String::new(),
            daemonize: false,
            maxmemory: 0,
            maxmemory_policy: 0,
            enable_debug_command: PROTECTED_NO,
            stream_node_max_entries: 100,
            stream_node_max_bytes: 4096,
            maxmemory_samples: 0,
            maxmemory_eviction_tenacity: 0,
            lfu_log_factor: 0,
            lfu_decay_time: 0,
            replica_ignore_maxmemory: true,
            busy_reply_threshold_ms: 0,
            key_load_delay: 0,
            rdb_key_save_delay: 0,
            loading_process_events_interval_bytes: 2 * 1024 * 1024,
            busy_poll_us: 0,
            io_threads: 1,
            notify_keyspace_events: 0,
            tracking_table_max_keys: 0,
            slowlog_log_slower_than: 0,
            slowlog_max_len: 0,
            acllog_max_len: 0,
            latency_monitor_threshold: 0,
            latency_tracking: false,
            latency_tracking_info_percentiles: Vec::new(),
            config_file: None,
            normal_output_limit: OutputLimit::default(),
            replica_output_limit: OutputLimit::default(),
            repl: ReplSettings::default(),
            repl_diskless_sync: false,
            repl_disable_tcp_nodelay: false,
            pubsub_output_limit: OutputLimit::default(),
            command_renames: CommandRenames::default(),
            replica: ReplicaSettings::default(),
            ops: ops::OpsSettings::default(),
            acl: acl::AclSettings::default(),
            tls: tls::TlsSettings::default(),
        };
        for param in PARAMS {
            let args = default_args(param);
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            param
                .set(&mut config, &refs, &mut LoadState::default())
                .unwrap_or_else(|e| panic!("the default of {} must be valid: {e}", param.name));
        }
        config
    }
}

impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        PARAMS.iter().all(|p| p.get(self) == p.get(other))
            && self.config_file == other.config_file
            && self.command_renames == other.command_renames
            && self.replica.replicaof == other.replica.replicaof
            && self.acl.users == other.acl.users
    }
}

impl Eq for Config {}
