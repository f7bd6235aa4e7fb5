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
//! Values that need a feature hozon does not have yet (snapshots, so save
//! points; `maxmemory` eviction; daemonizing) are accepted by the parser but
//! refused by [`Config::check_supported`], which the server runs at startup
//! and CONFIG SET runs before applying: such settings are refused loudly,
//! never silently ignored.

use std::path::{Path, PathBuf};

use crate::types::num::parse_i64;
use crate::types::EncodingLimits;

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
    /// `daemonize`: only `no` is supported (run under a supervisor).
    pub daemonize: bool,
    /// `maxmemory`: memory limit in bytes; only 0 (no limit) is supported.
    pub maxmemory: u64,
    /// `maxmemory-policy`: eviction policy (no effect while `maxmemory` is 0).
    pub maxmemory_policy: usize,
    /// `busy-reply-threshold` (alias `lua-time-limit`): ms before a script
    /// counts as busy (5000).
    pub busy_reply_threshold_ms: u64,
    /// `busy-poll-us` (hozon only): how long the event loop keeps polling
    /// for new requests before it sleeps, after turns whose requests came
    /// close together (20 µs; 0: always sleep at once). See
    /// `server::busy_poll`.
    pub busy_poll_us: u64,
    /// The configuration file the server was started with, if any (INFO
    /// `config_file`).
    pub config_file: Option<PathBuf>,
    /// `client-output-buffer-limit normal …` (0 0 0: none). Kept and shown;
    /// replies to a client's own commands are not cut off.
    pub normal_output_limit: OutputLimit,
    /// `client-output-buffer-limit replica …` (256mb 64mb 60); hozon has no
    /// replicas, the value is kept for CONFIG GET.
    pub replica_output_limit: OutputLimit,
    /// `client-output-buffer-limit pubsub …` (32mb 8mb 60): a subscriber
    /// whose unread messages exceed it is disconnected.
    pub pubsub_output_limit: OutputLimit,
    /// `rename-command` lines of the configuration file: the names clients
    /// reach commands by (configuration file and flags only, as in Redis).
    pub command_renames: CommandRenames,
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
            busy_reply_threshold_ms: 0,
            busy_poll_us: 0,
            config_file: None,
            normal_output_limit: OutputLimit::default(),
            replica_output_limit: OutputLimit::default(),
            pubsub_output_limit: OutputLimit::default(),
            command_renames: CommandRenames::default(),
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

// ---------------------------------------------------------------------------
// The parameter table.

/// CONFIG SET refuses the parameter (`can't set immutable config`).
pub const IMMUTABLE: u8 = 1;
/// CONFIG SET refuses the parameter for safety (`can't set protected
/// config`): where data files go must not be changeable over the network.
pub const PROTECTED: u8 = 2;
/// The value is a list of words (`save`, `bind`).
pub const MULTI_ARG: u8 = 4;

/// How a parameter's value is parsed, stored and shown.
pub enum Kind {
    /// `yes` / `no`.
    Bool {
        /// Reads the value.
        get: fn(&Config) -> bool,
        /// Stores a value.
        set: fn(&mut Config, bool),
    },
    /// An integer with inclusive bounds.
    Int {
        /// Lower bound.
        min: i128,
        /// Upper bound.
        max: i128,
        /// Accepts memory units (`1gb`, `64k`), like Redis's MEMORY_CONFIG.
        memory: bool,
        /// Redis stores it in an unsigned type: negative input wraps and
        /// fails the bounds check, as in Redis.
        unsigned: bool,
        /// Reads the value.
        get: fn(&Config) -> i128,
        /// Stores a value (within bounds).
        set: fn(&mut Config, i128),
    },
    /// One of a fixed set of words.
    Enum {
        /// The accepted words, in the order error messages list them.
        values: &'static [&'static str],
        /// Reads the index of the value.
        get: fn(&Config) -> usize,
        /// Stores the index of a value.
        set: fn(&mut Config, usize),
    },
    /// A string, with an optional validation.
    Str {
        /// Reads the value.
        get: fn(&Config) -> Vec<u8>,
        /// Validates and stores a value.
        set: fn(&mut Config, &[u8]) -> Result<(), String>,
    },
    /// Anything else (`save`, `bind`, `dir`).
    Special {
        /// Reads the value as CONFIG GET shows it.
        get: fn(&Config) -> Vec<u8>,
        /// Validates and stores the value's words.
        set: SpecialSetter,
    },
}

/// Stores the words of a [`Kind::Special`] value; the error is Redis's text.
pub type SpecialSetter = fn(&mut Config, &[&[u8]], &mut LoadState) -> Result<(), String>;

/// One configuration parameter.
pub struct Param {
    /// Redis's name.
    pub name: &'static str,
    /// The older name Redis also accepts, if any.
    pub alias: Option<&'static str>,
    /// [`IMMUTABLE`], [`PROTECTED`], [`MULTI_ARG`].
    pub flags: u8,
    /// The default, as it would be written in the configuration file.
    pub default: &'static str,
    /// Type, storage and validation.
    pub kind: Kind,
    /// What is not supported yet: a value for which this returns `Some`
    /// is refused at startup and by CONFIG SET.
    pub unsupported: Option<fn(&Config) -> Option<&'static Unsupported>>,
}

/// State carried across the lines of one configuration load (Redis's
/// `save` lines accumulate within a file, but the first one replaces the
/// defaults).
#[derive(Debug, Default)]
pub struct LoadState {
    reading_file: bool,
    save_seen: bool,
}

macro_rules! bool_param {
    ($name:expr, $alias:expr, $flags:expr, $default:expr, $field:ident) => {
        Param {
            name: $name,
            alias: $alias,
            flags: $flags,
            default: $default,
            kind: Kind::Bool {
                get: |c| c.$field,
                set: |c, v| c.$field = v,
            },
            unsupported: None,
        }
    };
}

macro_rules! int_param {
    ($name:expr, $alias:expr, $flags:expr, $default:expr, $min:expr, $max:expr, $memory:expr, $unsigned:expr,
     |$c:ident| $get:expr, |$cs:ident, $v:ident| $set:expr) => {
        Param {
            name: $name,
            alias: $alias,
            flags: $flags,
            default: $default,
            kind: Kind::Int {
                min: $min as i128,
                max: $max as i128,
                memory: $memory,
                unsigned: $unsigned,
                get: |$c| $get as i128,
                set: |$cs, $v| $set,
            },
            unsupported: None,
        }
    };
}

const INT_MAX: i128 = i32::MAX as i128;
const INT_MIN: i128 = i32::MIN as i128;
const UINT_MAX: i128 = u32::MAX as i128;
const LONG_MAX: i128 = i64::MAX as i128;
const ULLONG_MAX: i128 = u64::MAX as i128;
const MB: i128 = 1024 * 1024;

/// `maxmemory-policy` values, in Redis's order.
pub const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];
const FSYNC_POLICIES: &[&str] = &["everysec", "always", "no"];

/// Why a setting is refused, and what to do instead.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// One line: what is missing (CONFIG SET's error text).
    pub reason: &'static str,
    /// What to do instead (printed at startup).
    pub remedy: &'static str,
}

const NO_DAEMONIZE: Unsupported = Unsupported {
    reason: "daemonize yes is not supported",
    remedy: "Run hozon-server in the foreground under a supervisor (systemd, docker, ...).",
};

const NO_MAXMEMORY: Unsupported = Unsupported {
    reason: "maxmemory is not supported yet (hozon does not evict keys)",
    remedy: "Remove maxmemory or set it to 0.",
};

/// Every parameter hozon knows, each defined once. Integer parameters read
/// `int_param!(name, alias, flags, default, min, max, memory units?,
/// unsigned in Redis?, get, set)`.
#[rustfmt::skip]
pub static PARAMS: &[Param] = &[
    int_param!("port", None, 0, "6379", 0, 65535, false, false, |c| c.port, |c, v| c.port = v as u16),
    Param {
        name: "bind",
        alias: None,
        flags: MULTI_ARG,
        default: "127.0.0.1",
        kind: Kind::Special {
            get: |c| c.bind.join(" ").into_bytes(),
            set: set_bind,
        },
        unsupported: None,
    },
    bool_param!("protected-mode", None, 0, "yes", protected_mode),
    Param {
        name: "requirepass",
        alias: None,
        flags: 0,
        default: "",
        kind: Kind::Str {
            get: |c| c.requirepass.clone().unwrap_or_default(),
            set: |c, v| {
                c.requirepass = if v.is_empty() { None } else { Some(v.to_vec()) };
                Ok(())
            },
        },
        unsupported: None,
    },
    int_param!("maxclients", None, 0, "10000", 1, UINT_MAX, false, true, |c| c.maxclients, |c, v| c.maxclients = v as u64),
    int_param!("timeout", None, 0, "0", 0, INT_MAX, false, false, |c| c.timeout_s, |c, v| c.timeout_s = v as u64),
    int_param!("tcp-keepalive", None, 0, "300", 0, INT_MAX, false, false, |c| c.tcp_keepalive_s, |c, v| c.tcp_keepalive_s = v as u64),
    int_param!("databases", None, IMMUTABLE, "16", 1, INT_MAX, false, false, |c| c.databases, |c, v| c.databases = v as usize),
    Param {
        name: "dir",
        alias: None,
        flags: PROTECTED,
        default: "./data",
        kind: Kind::Special {
            get: |c| c.dir.to_string_lossy().into_owned().into_bytes(),
            set: |c, args, _| match args {
                [dir] => {
                    c.dir = PathBuf::from(String::from_utf8_lossy(dir).into_owned());
                    Ok(())
                }
                _ => Err("wrong number of arguments".into()),
            },
        },
        unsupported: None,
    },
    Param {
        name: "dbfilename",
        alias: None,
        flags: PROTECTED,
        default: "dump.hoz",
        kind: Kind::Str {
            get: |c| c.dbfilename.clone().into_bytes(),
            set: |c, v| {
                if !is_base_name(v) {
                    return Err("dbfilename can't be a path, just a filename".into());
                }
                c.dbfilename = String::from_utf8_lossy(v).into_owned();
                Ok(())
            },
        },
        unsupported: None,
    },
    Param {
        name: "appendonly",
        alias: None,
        flags: 0,
        default: "yes",
        kind: Kind::Bool {
            get: |c| c.appendonly,
            set: |c, v| c.appendonly = v,
        },
        unsupported: None,
    },
    Param {
        name: "appendfilename",
        alias: None,
        flags: IMMUTABLE,
        default: "appendonly.aof",
        kind: Kind::Str {
            get: |c| c.appendfilename.clone().into_bytes(),
            set: |c, v| {
                if v.is_empty() {
                    return Err("appendfilename can't be empty".into());
                }
                if !is_base_name(v) {
                    return Err("appendfilename can't be a path, just a filename".into());
                }
                c.appendfilename = String::from_utf8_lossy(v).into_owned();
                Ok(())
            },
        },
        unsupported: None,
    },
    Param {
        name: "appendfsync",
        alias: None,
        flags: 0,
        default: "everysec",
        kind: Kind::Enum {
            values: FSYNC_POLICIES,
            get: |c| match c.appendfsync {
                AppendFsync::Everysec => 0,
                AppendFsync::Always => 1,
                AppendFsync::No => 2,
            },
            set: |c, i| {
                c.appendfsync = match i {
                    0 => AppendFsync::Everysec,
                    1 => AppendFsync::Always,
                    _ => AppendFsync::No,
                }
            },
        },
        unsupported: None,
    },
    Param {
        name: "save",
        alias: None,
        flags: MULTI_ARG,
        default: "3600 1 300 100 60 10000",
        kind: Kind::Special {
            get: |c| {
                let points: Vec<String> = c
                    .save
                    .iter()
                    .map(|p| format!("{} {}", p.seconds, p.changes))
                    .collect();
                points.join(" ").into_bytes()
            },
            set: set_save,
        },
        unsupported: None,
    },
    Param {
        name: "client-output-buffer-limit",
        alias: None,
        flags: MULTI_ARG,
        default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        kind: Kind::Special {
            get: |c| {
                let class = |name: &str, l: &OutputLimit| {
                    format!("{name} {} {} {}", l.hard_bytes, l.soft_bytes, l.soft_seconds)
                };
                [
                    class("normal", &c.normal_output_limit),
                    class("slave", &c.replica_output_limit),
                    class("pubsub", &c.pubsub_output_limit),
                ]
                .join(" ")
                .into_bytes()
            },
            set: set_output_limits,
        },
        unsupported: None,
    },
    bool_param!("aof-load-truncated", None, 0, "yes", aof_load_truncated),
    int_param!("auto-aof-rewrite-percentage", None, 0, "100", 0, INT_MAX, false, false, |c| c.auto_aof_rewrite_percentage, |c, v| c.auto_aof_rewrite_percentage = v as u32),
    int_param!("auto-aof-rewrite-min-size", None, 0, "67108864", 0, LONG_MAX, true, false, |c| c.auto_aof_rewrite_min_size, |c, v| c.auto_aof_rewrite_min_size = v as u64),
    bool_param!("no-appendfsync-on-rewrite", None, 0, "no", no_appendfsync_on_rewrite),
    bool_param!("aof-rewrite-incremental-fsync", None, 0, "yes", aof_rewrite_incremental_fsync),
    Param {
        name: "aof-preamble",
        alias: None,
        flags: 0,
        default: "native",
        kind: Kind::Enum {
            values: &["native", "none", "rdb"],
            get: |c| match c.aof_preamble {
                AofPreamble::Native => 0,
                AofPreamble::None => 1,
                AofPreamble::Rdb => 2,
            },
            set: |c, i| {
                c.aof_preamble = match i {
                    0 => AofPreamble::Native,
                    1 => AofPreamble::None,
                    _ => AofPreamble::Rdb,
                }
            },
        },
        unsupported: None,
    },
    Param {
        name: "snapshot-format",
        alias: None,
        flags: 0,
        default: "native",
        kind: Kind::Enum {
            values: &["native", "rdb"],
            get: |c| match c.snapshot_format {
                SnapshotFormat::Native => 0,
                SnapshotFormat::Rdb => 1,
            },
            set: |c, i| {
                c.snapshot_format = if i == 0 {
                    SnapshotFormat::Native
                } else {
                    SnapshotFormat::Rdb
                }
            },
        },
        unsupported: None,
    },
    bool_param!("rdbcompression", None, 0, "yes", rdbcompression),
    bool_param!("rdbchecksum", None, 0, "yes", rdbchecksum),
    bool_param!(
        "stop-writes-on-bgsave-error",
        None,
        0,
        "yes",
        stop_writes_on_bgsave_error
    ),
    int_param!("hz", None, 0, "10", 0, INT_MAX, false, false, |c| c.hz, |c, v| c.hz = v.clamp(1, 500) as u32),
    Param {
        name: "loglevel",
        alias: None,
        flags: 0,
        default: "notice",
        kind: Kind::Enum {
            values: LOGLEVELS,
            get: |c| c.loglevel as usize,
            set: |c, i| {
                c.loglevel = match i {
                    0 => LogLevel::Debug,
                    1 => LogLevel::Verbose,
                    2 => LogLevel::Notice,
                    _ => LogLevel::Warning,
                }
            },
        },
        unsupported: None,
    },
    Param {
        name: "logfile",
        alias: None,
        flags: IMMUTABLE,
        default: "",
        kind: Kind::Str {
            get: |c| c.logfile.clone().into_bytes(),
            set: |c, v| {
                c.logfile = String::from_utf8_lossy(v).into_owned();
                Ok(())
            },
        },
        unsupported: None,
    },
    Param {
        name: "daemonize",
        alias: None,
        flags: IMMUTABLE,
        default: "no",
        kind: Kind::Bool {
            get: |c| c.daemonize,
            set: |c, v| c.daemonize = v,
        },
        unsupported: Some(|c| c.daemonize.then_some(&NO_DAEMONIZE)),
    },
    int_param!("proto-max-bulk-len", None, 0, "536870912", MB, LONG_MAX, true, false, |c| c.proto_max_bulk_len, |c, v| c.proto_max_bulk_len = v as u64),
    int_param!("client-query-buffer-limit", None, 0, "1073741824", MB, LONG_MAX, true, true, |c| c.client_query_buffer_limit, |c, v| c.client_query_buffer_limit = v as u64),
    int_param!("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), 0, "512", 0, LONG_MAX, false, true, |c| c.limits.hash_max_listpack_entries, |c, v| c.limits.hash_max_listpack_entries = v as usize),
    int_param!("hash-max-listpack-value", Some("hash-max-ziplist-value"), 0, "64", 0, LONG_MAX, true, true, |c| c.limits.hash_max_listpack_value, |c, v| c.limits.hash_max_listpack_value = v as usize),
    int_param!("set-max-intset-entries", None, 0, "512", 0, LONG_MAX, false, true, |c| c.limits.set_max_intset_entries, |c, v| c.limits.set_max_intset_entries = v as usize),
    int_param!("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), 0, "128", 0, LONG_MAX, false, true, |c| c.limits.zset_max_listpack_entries, |c, v| c.limits.zset_max_listpack_entries = v as usize),
    int_param!("zset-max-listpack-value", Some("zset-max-ziplist-value"), 0, "64", 0, LONG_MAX, true, true, |c| c.limits.zset_max_listpack_value, |c, v| c.limits.zset_max_listpack_value = v as usize),
    int_param!("list-max-listpack-size", Some("list-max-ziplist-size"), 0, "-2", INT_MIN, INT_MAX, false, false, |c| c.limits.list_max_listpack_size, |c, v| c.limits.list_max_listpack_size = v as i64),
    Param {
        name: "maxmemory",
        alias: None,
        flags: 0,
        default: "0",
        kind: Kind::Int {
            min: 0,
            max: ULLONG_MAX,
            memory: true,
            unsigned: true,
            get: |c| c.maxmemory as i128,
            set: |c, v| c.maxmemory = v as u64,
        },
        unsupported: Some(|c| (c.maxmemory != 0).then_some(&NO_MAXMEMORY)),
    },
    Param {
        name: "maxmemory-policy",
        alias: None,
        flags: 0,
        default: "noeviction",
        kind: Kind::Enum {
            values: MAXMEMORY_POLICIES,
            get: |c| c.maxmemory_policy,
            set: |c, i| c.maxmemory_policy = i,
        },
        unsupported: None,
    },
    int_param!("busy-reply-threshold", Some("lua-time-limit"), 0, "5000", 0, LONG_MAX, false, false, |c| c.busy_reply_threshold_ms, |c, v| c.busy_reply_threshold_ms = v as u64),
    int_param!("busy-poll-us", None, 0, "20", 0, 10000, false, false, |c| c.busy_poll_us, |c, v| c.busy_poll_us = v as u64),
];

/// Redis 7.0 parameters hozon does not implement, so a configuration
/// written for Redis gets a precise refusal instead of "bad directive".
#[rustfmt::skip]
const REDIS_ONLY_PARAMS: &[&str] = &[
    "io-threads-do-reads", "always-show-logo", "rdb-del-sync-files",
    "activerehashing", "set-proc-title", "dynamic-hz", "lazyfree-lazy-eviction", "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush", "repl-disable-tcp-nodelay",
    "repl-diskless-sync",
    "cluster-require-full-coverage", "rdb-save-incremental-fsync", "aof-use-rdb-preamble", "aof-timestamp-enabled",
    "cluster-replica-no-failover", "cluster-slave-no-failover", "replica-lazy-flush", "slave-lazy-flush",
    "replica-serve-stale-data", "slave-serve-stale-data", "replica-read-only", "slave-read-only",
    "replica-ignore-maxmemory", "slave-ignore-maxmemory", "jemalloc-bg-thread", "activedefrag", "syslog-enabled",
    "cluster-enabled", "cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down", "crash-log-enabled",
    "crash-memcheck-enabled", "disable-thp", "cluster-allow-replica-migration", "replica-announced",
    "latency-tracking", "aof-disable-auto-gc", "replica-ignore-disk-write-errors", "aclfile", "unixsocket",
    "pidfile", "replica-announce-ip", "slave-announce-ip", "masteruser", "cluster-announce-ip",
    "cluster-config-file", "cluster-announce-hostname", "syslog-ident", "appenddirname", "server_cpulist",
    "bio_cpulist", "aof_rewrite_cpulist", "bgsave_cpulist", "ignore-warnings", "proc-title-template",
    "bind-source-addr", "masterauth", "supervised", "syslog-facility", "repl-diskless-load", "oom-score-adj",
    "acl-pubsub-default", "sanitize-dump-payload", "enable-protected-configs", "enable-debug-command",
    "enable-module-command", "cluster-preferred-endpoint-type", "propagation-error-behavior", "shutdown-on-sigint",
    "shutdown-on-sigterm", "io-threads", "cluster-replica-validity-factor",
    "cluster-slave-validity-factor", "cluster-migration-barrier", "active-defrag-cycle-min",
    "active-defrag-cycle-max", "active-defrag-threshold-lower", "active-defrag-threshold-upper", "lfu-log-factor",
    "lfu-decay-time", "replica-priority", "slave-priority", "repl-diskless-sync-delay", "maxmemory-samples",
    "maxmemory-eviction-tenacity", "replica-announce-port", "slave-announce-port", "tcp-backlog", "cluster-port",
    "cluster-announce-bus-port", "cluster-announce-port", "cluster-announce-tls-port", "repl-timeout",
    "repl-ping-replica-period", "repl-ping-slave-period", "list-compress-depth", "active-expire-effort",
    "min-replicas-to-write", "min-slaves-to-write", "min-replicas-max-lag", "min-slaves-max-lag",
    "shutdown-timeout", "repl-diskless-sync-max-replicas", "unixsocketperm", "socket-mark-id",
    "active-defrag-max-scan-fields", "slowlog-max-len", "acllog-max-len", "cluster-node-timeout",
    "slowlog-log-slower-than", "latency-monitor-threshold", "stream-node-max-entries", "repl-backlog-size",
    "cluster-link-sendbuf-limit", "active-defrag-ignore-bytes", "stream-node-max-bytes", "hll-sparse-max-bytes",
    "tracking-table-max-keys", "maxmemory-clients", "repl-backlog-ttl",
    "oom-score-adj-values", "notify-keyspace-events", "replicaof", "slaveof",
    "latency-tracking-info-percentiles", "tls-port", "user", "loadmodule",
];

/// Directives Redis still accepts and ignores (with their argument count).
const DEPRECATED: &[&str] = &[
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// The parameter named `name` (or its alias), case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.name.as_bytes().eq_ignore_ascii_case(name)
            || p.alias
                .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(name))
    })
}

fn default_args(param: &Param) -> Vec<Vec<u8>> {
    if param.flags & MULTI_ARG != 0 {
        param
            .default
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect()
    } else {
        vec![param.default.as_bytes().to_vec()]
    }
}

fn is_base_name(name: &[u8]) -> bool {
    !name.contains(&b'/') && !name.contains(&b'\\')
}

fn set_bind(config: &mut Config, args: &[&[u8]], _: &mut LoadState) -> Result<(), String> {
    const BIND_MAX: usize = 16;
    if args.len() > BIND_MAX {
        return Err("Too many bind addresses specified.".into());
    }
    // A single empty word means "no address given": listen everywhere,
    // as Redis does.
    let args = if args.len() == 1 && args[0].is_empty() {
        &[][..]
    } else {
        args
    };
    config.bind = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Ok(())
}

fn set_save(config: &mut Config, args: &[&[u8]], state: &mut LoadState) -> Result<(), String> {
    // A single empty word means "no save points".
    let args = if args.len() == 1 && args[0].is_empty() {
        &[][..]
    } else {
        args
    };
    if args.len() % 2 == 1 {
        return Err("Invalid save parameters".into());
    }
    let mut points = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks(2) {
        let seconds = strtoll_whole(pair[0]).filter(|&s| s >= 1);
        let changes = strtoll_whole(pair[1]).filter(|&c| c >= 0);
        match (seconds, changes) {
            (Some(s), Some(c)) => points.push(SavePoint {
                seconds: s as u64,
                changes: c as u64,
            }),
            _ => return Err("Invalid save parameters".into()),
        }
    }
    // Within a configuration file, `save` lines add up; the first one
    // replaces the defaults. Elsewhere (CONFIG SET, defaults) the value
    // replaces the list.
    if state.reading_file && state.save_seen {
        config.save.extend(points);
    } else {
        config.save = points;
    }
    if state.reading_file {
        state.save_seen = true;
    }
    Ok(())
}

/// C's `strtoll(s, &end, 10)` requiring `*end == '\0'`: optional leading
/// whitespace and sign, digits; the empty string is 0; overflow saturates.
fn strtoll_whole(s: &[u8]) -> Option<i64> {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let digits_start = i;
    let mut value: i128 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        value = (value * 10 + i128::from(s[i] - b'0')).min(i128::from(i64::MAX) + 1);
        i += 1;
    }
    if i == digits_start {
        // No digits: strtoll consumes nothing, so the end is the start.
        return if s.is_empty() { Some(0) } else { None };
    }
    if i != s.len() {
        return None;
    }
    let value = if negative { -value } else { value };
    Some(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// Redis's setConfigClientOutputBufferLimitOption: groups of
/// `<class> <hard> <soft> <soft seconds>`; only the named classes change,
/// and nothing changes unless every group is valid.
fn set_output_limits(c: &mut Config, args: &[&[u8]], _: &mut LoadState) -> Result<(), String> {
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut limits = [
        c.normal_output_limit,
        c.replica_output_limit,
        c.pubsub_output_limit,
    ];
    for group in args.chunks(4) {
        let class = String::from_utf8_lossy(group[0]).to_ascii_lowercase();
        let target = match class.as_str() {
            "normal" => &mut limits[0],
            "slave" | "replica" => &mut limits[1],
            "pubsub" => &mut limits[2],
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let bad = || {
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string()
        };
        let hard = memtoull(group[1]).filter(|v| *v >= 0).ok_or_else(bad)?;
        let soft = memtoull(group[2]).filter(|v| *v >= 0).ok_or_else(bad)?;
        let seconds = crate::types::num::parse_i64(group[3])
            .filter(|v| *v >= 0)
            .ok_or_else(bad)?;
        *target = OutputLimit {
            hard_bytes: hard as u64,
            soft_bytes: soft as u64,
            soft_seconds: seconds as u64,
        };
    }
    [
        c.normal_output_limit,
        c.replica_output_limit,
        c.pubsub_output_limit,
    ] = limits;
    Ok(())
}

/// Redis's `memtoull`: digits followed by an optional unit (`b`, `k`,
/// `kb`, `m`, `mb`, `g`, `gb`, any case); no sign. Returns the value as
/// Redis stores it in a `long long` (wrapping on overflow, as C does).
fn memtoull(s: &[u8]) -> Option<i64> {
    if s.first() == Some(&b'-') {
        return None;
    }
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    let unit = &s[digits..];
    let mul: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    // strtoull saturates at ULLONG_MAX on overflow (and Redis only checks
    // for EINVAL), then the multiplication wraps.
    let mut value: u64 = 0;
    for &d in &s[..digits] {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .unwrap_or(u64::MAX);
        if value == u64::MAX {
            break;
        }
    }
    Some(value.wrapping_mul(mul) as i64)
}

impl Param {
    /// The names this parameter answers to: its name, then its alias.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.alias)
    }

    /// True when the value is a list of words.
    pub fn is_multi_arg(&self) -> bool {
        self.flags & MULTI_ARG != 0
    }

    /// The value as CONFIG GET shows it.
    pub fn get(&self, config: &Config) -> Vec<u8> {
        match &self.kind {
            Kind::Bool { get, .. } => (if get(config) { "yes" } else { "no" }).as_bytes().to_vec(),
            Kind::Int { get, .. } => get(config).to_string().into_bytes(),
            Kind::Enum { values, get, .. } => values
                .get(get(config))
                .copied()
                .unwrap_or("unknown")
                .as_bytes()
                .to_vec(),
            Kind::Str { get, .. } | Kind::Special { get, .. } => get(config),
        }
    }

    /// Parses and stores `args` (one word, or several for a multi-word
    /// parameter). The error is Redis's text (`argument must be 'yes' or
    /// 'no'`).
    pub fn set(
        &self,
        config: &mut Config,
        args: &[&[u8]],
        state: &mut LoadState,
    ) -> Result<(), String> {
        let single = || -> Result<&[u8], String> {
            match args {
                [one] => Ok(one),
                _ => Err("wrong number of arguments".into()),
            }
        };
        match &self.kind {
            Kind::Bool { set, .. } => {
                let value = single()?;
                if value.eq_ignore_ascii_case(b"yes") {
                    set(config, true);
                } else if value.eq_ignore_ascii_case(b"no") {
                    set(config, false);
                } else {
                    return Err("argument must be 'yes' or 'no'".into());
                }
                Ok(())
            }
            Kind::Int {
                min,
                max,
                memory,
                unsigned,
                set,
                ..
            } => {
                let text = single()?;
                let parsed = if *memory {
                    memtoull(text)
                } else {
                    parse_i64(text)
                };
                let Some(raw) = parsed else {
                    return Err(if *memory {
                        "argument must be a memory value".into()
                    } else {
                        "argument couldn't be parsed into an integer".into()
                    });
                };
                let value = if *unsigned {
                    i128::from(raw as u64)
                } else {
                    i128::from(raw)
                };
                if value < *min || value > *max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                set(config, value);
                Ok(())
            }
            Kind::Enum { values, set, .. } => {
                let word = match args {
                    [one] => Some(*one),
                    _ => None,
                };
                match word.and_then(|w| {
                    values
                        .iter()
                        .position(|v| v.as_bytes().eq_ignore_ascii_case(w))
                }) {
                    Some(i) => {
                        set(config, i);
                        Ok(())
                    }
                    None => Err(format!(
                        "argument(s) must be one of the following: {}",
                        values.join(", ")
                    )),
                }
            }
            Kind::Str { set, .. } => set(config, single()?),
            Kind::Special { set, .. } => set(config, args, state),
        }
    }
}

// ---------------------------------------------------------------------------
// Loading: configuration files and command-line flags.

/// A configuration that could not be loaded, with what Redis would print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The line number (1-based) and the offending line, when the error
    /// comes from a line.
    pub line: Option<(usize, String)>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    /// Redis's fatal configuration error report.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (hozon {}) ***",
            env!("CARGO_PKG_VERSION")
        )?;
        if let Some((number, line)) = &self.line {
            writeln!(f, "Reading the configuration file, at line {number}")?;
            writeln!(f, ">>> '{line}'")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn plain(message: impl Into<String>) -> ConfigError {
        ConfigError {
            line: None,
            message: message.into(),
        }
    }
}

/// What the command line asked for besides configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Run the server with this configuration.
    Run(Box<Config>),
    /// `--version` / `-v`.
    Version,
    /// `--help` / `-h`.
    Help,
}

/// Where a configuration line came from, for include paths.
const MAX_INCLUDE_DEPTH: usize = 16;

impl Config {
    /// Applies configuration text (redis.conf syntax: `name value …` per
    /// line, `#` comments, quoting as in redis-cli, `include <file>`).
    /// Line numbers in errors count from 1 in `text`. `rename-command`
    /// lines are checked against `commands` ([`Config::apply_text`] passes
    /// hozon's command table).
    pub fn apply_text_with_commands(
        &mut self,
        text: &[u8],
        commands: &dyn CommandCatalog,
    ) -> Result<(), ConfigError> {
        let mut state = LoadState {
            reading_file: true,
            save_seen: false,
        };
        self.apply_text_with(text, &mut state, 0, commands)?;
        Ok(())
    }

    fn apply_text_with(
        &mut self,
        text: &[u8],
        state: &mut LoadState,
        depth: usize,
        commands: &dyn CommandCatalog,
    ) -> Result<(), ConfigError> {
        for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = trim(raw);
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let at = |message: String| ConfigError {
                line: Some((index + 1, String::from_utf8_lossy(line).into_owned())),
                message,
            };
            let Some(args) = crate::resp::split_args(line) else {
                return Err(at("Unbalanced quotes in configuration line".into()));
            };
            if args.is_empty() {
                continue;
            }
            let name = args[0].to_ascii_lowercase();
            let values: Vec<&[u8]> = args[1..].iter().map(|a| a.as_slice()).collect();
            if let Some(param) = lookup(&name) {
                if !param.is_multi_arg() && values.len() != 1 {
                    return Err(at("wrong number of arguments".into()));
                }
                let result = if param.is_multi_arg() && values.len() == 1 && !values[0].is_empty() {
                    // `--bind "a b"` arrives as one word: split it.
                    let Some(words) = crate::resp::split_args(values[0]) else {
                        return Err(at("Unbalanced quotes in configuration line".into()));
                    };
                    let refs: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
                    param.set(self, &refs, state)
                } else {
                    param.set(self, &values, state)
                };
                result.map_err(at)?;
                continue;
            }
            if DEPRECATED.iter().any(|d| d.as_bytes() == name.as_slice()) && args.len() == 2 {
                continue;
            }
            if name == b"rename-command" && args.len() == 3 {
                self.command_renames
                    .rename(&args[1], &args[2], commands)
                    .map_err(at)?;
                continue;
            }
            if name == b"include" && args.len() == 2 {
                if depth >= MAX_INCLUDE_DEPTH {
                    return Err(at("include nesting is too deep".into()));
                }
                let path = String::from_utf8_lossy(&args[1]).into_owned();
                for file in include_targets(&path).map_err(at)? {
                    let content = std::fs::read(&file).map_err(|e| {
                        at(format!(
                            "Fatal error, can't open config file '{}': {}",
                            file.display(),
                            os_error_text(&e)
                        ))
                    })?;
                    self.apply_text_with(&content, state, depth + 1, commands)?;
                }
                continue;
            }
            let shown = String::from_utf8_lossy(&name).into_owned();
            if REDIS_ONLY_PARAMS.contains(&shown.as_str()) {
                return Err(at(format!("'{shown}' is a Redis directive hozon does not support; remove it from the configuration")));
            }
            return Err(at("Bad directive or wrong number of arguments".into()));
        }
        Ok(())
    }

    /// Parses a `redis-server`-style command line (without the program
    /// name): `[config-file | -] [--name value …]`, reading `-`
    /// (configuration from standard input) from `stdin`. Flags are turned
    /// into configuration lines appended after the file, exactly as
    /// `redis-server` does, so a flag overrides the file and error line
    /// numbers count the file's lines first. `rename-command` lines are
    /// checked against `commands` ([`Config::from_args`] passes hozon's
    /// command table).
    pub fn from_args_with_commands(
        args: &[String],
        stdin: &mut dyn std::io::Read,
        commands: &dyn CommandCatalog,
    ) -> Result<Invocation, ConfigError> {
        let mut config = Config::default();
        if args.is_empty() {
            return Ok(Invocation::Run(Box::new(config)));
        }
        match args[0].as_str() {
            "-v" | "--version" => return Ok(Invocation::Version),
            "-h" | "--help" => return Ok(Invocation::Help),
            _ => {}
        }
        let mut text: Vec<u8> = Vec::new();
        let mut first_option = 0;
        if !args[0].starts_with('-') {
            let path = Path::new(&args[0]);
            let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            text = std::fs::read(path).map_err(|e| {
                ConfigError::plain(format!(
                    "Fatal error, can't open config file '{}': {}",
                    absolute.display(),
                    os_error_text(&e)
                ))
            })?;
            config.config_file = Some(absolute);
            first_option = 1;
        }
        let (options, from_stdin) = options_text(args, first_option);
        if from_stdin {
            stdin.read_to_end(&mut text).map_err(|e| {
                ConfigError::plain(format!("reading the configuration from stdin: {e}"))
            })?;
        }
        text.push(b'\n');
        text.extend_from_slice(&options);
        config.apply_text_with_commands(&text, commands)?;
        Ok(Invocation::Run(Box::new(config)))
    }

    /// Refuses settings that need what hozon does not have yet
    /// (persistence, eviction, daemonizing). The error lists each refused
    /// setting under its reason, then what to do instead.
    pub fn check_supported(&self) -> Result<(), ConfigError> {
        let mut groups: Vec<(&'static Unsupported, Vec<String>)> = Vec::new();
        for p in PARAMS {
            let Some(why) = p.unsupported.and_then(|f| f(self)) else {
                continue;
            };
            let setting = format!("    {} {}", p.name, show_value(&p.get(self)));
            match groups.iter_mut().find(|(w, _)| std::ptr::eq(*w, why)) {
                Some((_, settings)) => settings.push(setting),
                None => groups.push((why, vec![setting])),
            }
        }
        if groups.is_empty() {
            return Ok(());
        }
        let text: Vec<String> = groups
            .iter()
            .map(|(why, settings)| {
                format!(
                    "Refused: {}:\n{}\n{}",
                    why.reason,
                    settings.join("\n"),
                    why.remedy
                )
            })
            .collect();
        Err(ConfigError::plain(text.join("\n")))
    }

    /// The first unsupported setting as CONFIG SET reports it: the
    /// parameter name and the reason.
    pub fn first_unsupported(&self) -> Option<(&'static str, &'static str)> {
        PARAMS.iter().find_map(|p| {
            p.unsupported
                .and_then(|f| f(self))
                .map(|why| (p.name, why.reason))
        })
    }
}

/// A value as it would be written on a configuration line.
fn show_value(value: &[u8]) -> String {
    if value.is_empty() || value.contains(&b' ') {
        let mut out = Vec::new();
        cat_repr(&mut out, value);
        String::from_utf8_lossy(&out).into_owned()
    } else {
        String::from_utf8_lossy(value).into_owned()
    }
}

/// The text of an I/O error without Rust's "(os error N)" suffix, as C's
/// `strerror` would print it.
pub fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let is_blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let start = line.iter().position(|b| !is_blank(b)).unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !is_blank(b))
        .map_or(start, |i| i + 1);
    &line[start..end]
}

/// The files an `include` names: the path itself, or with wildcards in
/// the file name, the matching files of its directory in name order (none
/// matching is fine, so an empty `conf.d` can be included).
fn include_targets(path: &str) -> Result<Vec<PathBuf>, String> {
    let p = Path::new(path);
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains(['*', '?', '[']) {
        return Ok(vec![p.to_path_buf()]);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            crate::glob::matches(
                name.as_bytes(),
                e.file_name().to_string_lossy().as_bytes(),
                false,
            )
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    Ok(files)
}

/// Turns command-line flags into configuration text the way `redis-server`
/// does (`--port 6380 --save ''` → `port "6380"\nsave ""`). Returns the
/// text and whether `-` asked for configuration on standard input.
fn options_text(args: &[String], first: usize) -> (Vec<u8>, bool) {
    let mut options: Vec<u8> = Vec::new();
    let mut from_stdin = false;
    let mut handled_last = true;
    let last = args.len() - 1;
    for j in first..args.len() {
        let arg = args[j].as_bytes();
        if arg == b"-" && (j == 0 || j == last) {
            from_stdin = true;
        } else if handled_last && arg.starts_with(b"--") {
            if !options.is_empty() {
                options.push(b'\n');
            }
            options.extend_from_slice(&arg[2..]);
            options.push(b' ');
            let words = crate::resp::split_args(arg).map_or(0, |w| w.len());
            if words == 1 {
                // A name alone: its value is the next argument. An empty
                // `--save` (followed by another flag or last) means `""`.
                handled_last = false;
                let is_save = arg.eq_ignore_ascii_case(b"--save");
                if is_save && (j == last || args[j + 1].starts_with("--")) {
                    options.extend_from_slice(b"\"\"");
                    handled_last = true;
                }
            } else {
                handled_last = true;
            }
        } else {
            cat_repr(&mut options, arg);
            options.push(b' ');
            handled_last = true;
        }
    }
    (options, from_stdin)
}

/// Redis's `sdscatrepr`: a double-quoted, escaped copy of `s`.
fn cat_repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        PARAMS.iter().all(|p| p.get(self) == p.get(other))
            && self.config_file == other.config_file
            && self.command_renames == other.command_renames
    }
}

impl Eq for Config {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_command_renames_disables_and_chains_like_redis() {
        let mut c = Config::default();
        c.apply_text(b"rename-command FLUSHALL f1u5h\nrename-command CONFIG \"\"\nrename-command get g1\nrename-command G1 g2\nrename-command DEBUG \"\"\n")
            .unwrap();
        let r = &c.command_renames;
        assert_eq!(r.resolve(b"F1U5H"), CommandName::Renamed("flushall"));
        assert_eq!(r.resolve(b"flushall"), CommandName::Removed);
        assert_eq!(r.resolve(b"config"), CommandName::Removed);
        assert_eq!(r.resolve(b"g1"), CommandName::Removed);
        assert_eq!(r.resolve(b"g2"), CommandName::Renamed("get"));
        assert_eq!(r.resolve(b"set"), CommandName::Unchanged);
        assert!(r.reachable("flushall") && r.reachable("get") && r.reachable("set"));
        assert!(!r.reachable("config"));
        let error = |text: &str| Config::default().apply_text(text.as_bytes()).unwrap_err();
        assert_eq!(
            error("rename-command nosuch x").message,
            "No such command in rename-command"
        );
        assert_eq!(
            error("rename-command get set").message,
            "Target command name already exists"
        );
        assert_eq!(
            error("rename-command get x\nrename-command get y").message,
            "No such command in rename-command"
        );
        assert_eq!(
            error("rename-command get").message,
            "Bad directive or wrong number of arguments"
        );
        assert_eq!(
            error("rename-command config|get x").message,
            "No such command in rename-command"
        );
        // A renamed-away name can be taken by another command.
        let mut c = Config::default();
        c.apply_text(b"rename-command get tmp\nrename-command set get\n")
            .unwrap();
        assert_eq!(
            c.command_renames.resolve(b"get"),
            CommandName::Renamed("set")
        );
        assert_eq!(c.command_renames.resolve(b"set"), CommandName::Removed);
        assert!(c.command_renames.reachable("get") && c.command_renames.reachable("set"));
    }

    fn run(args: &[&str]) -> Result<Config, ConfigError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match Config::from_args_with_stdin(&args, &mut std::io::empty())? {
            Invocation::Run(c) => Ok(*c),
            other => panic!("expected a configuration, got {other:?}"),
        }
    }

    fn get(config: &Config, name: &str) -> String {
        String::from_utf8(
            lookup(name.as_bytes())
                .expect("known parameter")
                .get(config),
        )
        .expect("utf-8")
    }

    #[test]
    fn defaults_come_from_the_table() {
        let c = Config::default();
        assert_eq!(c.port, 6379);
        assert_eq!(c.bind, vec!["127.0.0.1".to_string()]);
        assert_eq!(c.dir, PathBuf::from("./data"));
        assert!(c.appendonly);
        assert_eq!(c.appendfsync, AppendFsync::Everysec);
        assert_eq!(get(&c, "save"), "3600 1 300 100 60 10000");
        assert_eq!(c.limits.hash_max_listpack_entries, 512);
        assert_eq!(c.limits.zset_max_listpack_entries, 128);
        assert_eq!(c.limits.list_max_listpack_size, -2);
        assert_eq!(c.proto_max_bulk_len, 512 * 1024 * 1024);
        assert_eq!(c.hz, 10);
        assert_eq!(c.maxclients, 10000);
        assert_eq!(c.databases, 16);
        assert_eq!(c.requirepass, None);
        for p in PARAMS {
            let shown = p.get(&c);
            let expected: Vec<u8> = p.default.as_bytes().to_vec();
            assert_eq!(shown, expected, "default of {} shows as given", p.name);
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = PARAMS.iter().flat_map(|p| p.names()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        for name in &names {
            assert!(!REDIS_ONLY_PARAMS.contains(name), "{name} is implemented");
        }
    }

    #[test]
    fn flags_override_defaults() {
        let c = run(&[
            "--port",
            "7000",
            "--bind",
            "127.0.0.1",
            "::1",
            "--appendonly",
            "no",
            "--save",
            "",
        ])
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.bind, vec!["127.0.0.1".to_string(), "::1".to_string()]);
        assert!(!c.appendonly);
        assert!(c.save.is_empty());
        c.check_supported().unwrap();
    }

    #[test]
    fn multi_word_values_in_one_flag_are_split() {
        let c = run(&["--save", "900 1 300 10", "--bind", "127.0.0.1 ::1"]).unwrap();
        assert_eq!(get(&c, "save"), "900 1 300 10");
        assert_eq!(c.bind.len(), 2);
    }

    #[test]
    fn empty_save_flag_before_another_flag_or_last() {
        let c = run(&["--save", "--port", "7001"]).unwrap();
        assert!(c.save.is_empty());
        assert_eq!(c.port, 7001);
        let c = run(&["--port", "7001", "--save"]).unwrap();
        assert!(c.save.is_empty());
    }

    #[test]
    fn flag_errors_name_the_generated_line() {
        let e = run(&["--port", "abc"]).unwrap_err();
        assert_eq!(e.line, Some((2, "port \"abc\"".to_string())));
        assert_eq!(e.message, "argument couldn't be parsed into an integer");
        let e = run(&["--port", "0", "--bogus", "1"]).unwrap_err();
        assert_eq!(e.line, Some((3, "bogus \"1\"".to_string())));
        assert_eq!(e.message, "Bad directive or wrong number of arguments");
        let e = run(&["--port"]).unwrap_err();
        assert_eq!(e.message, "wrong number of arguments");
        let shown = e.to_string();
        assert!(shown.contains("*** FATAL CONFIG FILE ERROR"), "{shown}");
        assert!(
            shown.contains("Reading the configuration file, at line 2\n>>> 'port'\n"),
            "{shown}"
        );
    }

    #[test]
    fn version_and_help() {
        let v = Config::from_args_with_stdin(&["--version".to_string()], &mut std::io::empty())
            .unwrap();
        assert_eq!(v, Invocation::Version);
        let h = Config::from_args_with_stdin(&["-h".to_string()], &mut std::io::empty()).unwrap();
        assert_eq!(h, Invocation::Help);
    }

    #[test]
    fn config_file_syntax() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("extra.conf");
        std::fs::write(&inc, "maxclients 50\n").unwrap();
        let main = dir.path().join("main.conf");
        std::fs::write(
            &main,
            format!(
                "# a comment\n\n  port 7002  \nrequirepass \"pa ss\\x41\"\nsave 900 1\nsave 60 100\nhash-max-ziplist-entries 7\n\
                 list-max-ziplist-entries 5\ninclude {}\nlogfile ''\nloglevel WARNING\nappendonly no\n",
                inc.display()
            ),
        )
        .unwrap();
        let c = run(&[main.to_str().unwrap(), "--port", "7003"]).unwrap();
        assert_eq!(c.port, 7003, "flags come after the file");
        assert_eq!(c.requirepass.as_deref(), Some(&b"pa ssA"[..]));
        assert_eq!(
            get(&c, "save"),
            "900 1 60 100",
            "save lines add up in a file"
        );
        assert_eq!(c.limits.hash_max_listpack_entries, 7);
        assert_eq!(c.maxclients, 50);
        assert_eq!(c.loglevel, LogLevel::Warning);
        assert!(c.config_file.as_ref().is_some_and(|p| p.is_absolute()));
    }

    #[test]
    fn config_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("bad.conf");
        std::fs::write(&main, "port 7000\nappendonly maybe\n").unwrap();
        let e = run(&[main.to_str().unwrap()]).unwrap_err();
        assert_eq!(e.line, Some((2, "appendonly maybe".to_string())));
        assert_eq!(e.message, "argument must be 'yes' or 'no'");
        std::fs::write(&main, "port \"7000\n").unwrap();
        assert_eq!(
            run(&[main.to_str().unwrap()]).unwrap_err().message,
            "Unbalanced quotes in configuration line"
        );
        std::fs::write(&main, "slowlog-max-len 10\n").unwrap();
        assert!(run(&[main.to_str().unwrap()])
            .unwrap_err()
            .message
            .contains("hozon does not support"));
        std::fs::write(&main, "port 1 2\n").unwrap();
        assert_eq!(
            run(&[main.to_str().unwrap()]).unwrap_err().message,
            "wrong number of arguments"
        );
        let missing = dir.path().join("missing.conf");
        let e = run(&[missing.to_str().unwrap()]).unwrap_err();
        assert!(
            e.message
                .starts_with("Fatal error, can't open config file '"),
            "{}",
            e.message
        );
        assert!(
            e.message.ends_with("': No such file or directory"),
            "{}",
            e.message
        );
    }

    #[test]
    fn missing_features_are_refused_and_the_defaults_are_not() {
        run(&[]).unwrap().check_supported().unwrap();
        run(&["--save", ""]).unwrap().check_supported().unwrap();
        let c = run(&["--appendonly", "no", "--save", "", "--maxmemory", "1mb"]).unwrap();
        assert!(c
            .check_supported()
            .unwrap_err()
            .message
            .contains("maxmemory"));
        let c = run(&["--appendonly", "no", "--save", "", "--daemonize", "yes"]).unwrap();
        assert!(c
            .check_supported()
            .unwrap_err()
            .message
            .contains("daemonize"));
        assert_eq!(c.first_unsupported().map(|u| u.0), Some("daemonize"));
    }

    #[test]
    fn value_parsing_matches_redis() {
        let mut c = Config::default();
        let mut st = LoadState::default();
        let set = |c: &mut Config, st: &mut LoadState, name: &str, v: &str| {
            lookup(name.as_bytes()).unwrap().set(c, &[v.as_bytes()], st)
        };
        assert_eq!(
            set(&mut c, &mut st, "port", "65536").unwrap_err(),
            "argument must be between 0 and 65535 inclusive"
        );
        assert_eq!(
            set(&mut c, &mut st, "maxclients", "-1").unwrap_err(),
            "argument must be between 1 and 4294967295 inclusive"
        );
        assert_eq!(
            set(&mut c, &mut st, "maxclients", "0").unwrap_err(),
            "argument must be between 1 and 4294967295 inclusive"
        );
        set(&mut c, &mut st, "proto-max-bulk-len", "2mb").unwrap();
        assert_eq!(c.proto_max_bulk_len, 2 * 1024 * 1024);
        set(&mut c, &mut st, "proto-max-bulk-len", "2M").unwrap();
        assert_eq!(c.proto_max_bulk_len, 2_000_000);
        assert_eq!(
            set(&mut c, &mut st, "proto-max-bulk-len", "-5").unwrap_err(),
            "argument must be a memory value"
        );
        assert_eq!(
            set(&mut c, &mut st, "proto-max-bulk-len", "1x").unwrap_err(),
            "argument must be a memory value"
        );
        assert_eq!(
            set(&mut c, &mut st, "proto-max-bulk-len", "1k").unwrap_err(),
            "argument must be between 1048576 and 9223372036854775807 inclusive"
        );
        set(&mut c, &mut st, "hz", "0").unwrap();
        assert_eq!(c.hz, 1);
        set(&mut c, &mut st, "hz", "100000").unwrap();
        assert_eq!(c.hz, 500);
        assert_eq!(Config::default().busy_poll_us, 20);
        set(&mut c, &mut st, "busy-poll-us", "0").unwrap();
        assert_eq!((c.busy_poll_us, get(&c, "busy-poll-us").as_str()), (0, "0"));
        assert_eq!(
            set(&mut c, &mut st, "busy-poll-us", "10001").unwrap_err(),
            "argument must be between 0 and 10000 inclusive"
        );
        assert_eq!(
            set(&mut c, &mut st, "appendfsync", "sometimes").unwrap_err(),
            "argument(s) must be one of the following: everysec, always, no"
        );
        set(&mut c, &mut st, "LogLevel", "Debug").unwrap();
        assert_eq!(get(&c, "loglevel"), "debug");
        assert_eq!(
            set(&mut c, &mut st, "dbfilename", "a/b").unwrap_err(),
            "dbfilename can't be a path, just a filename"
        );
        assert_eq!(
            set(&mut c, &mut st, "appendfilename", "").unwrap_err(),
            "appendfilename can't be empty"
        );
        assert_eq!(
            set(&mut c, &mut st, "save", "1").unwrap_err(),
            "Invalid save parameters"
        );
        assert_eq!(
            set(&mut c, &mut st, "timeout", "1.5").unwrap_err(),
            "argument couldn't be parsed into an integer"
        );
        set(&mut c, &mut st, "list-max-ziplist-size", "-5").unwrap();
        assert_eq!(get(&c, "list-max-listpack-size"), "-5");
        set(&mut c, &mut st, "maxmemory", "").unwrap();
        assert_eq!(c.maxmemory, 0);
    }

    #[test]
    fn repr_quotes_like_redis() {
        let mut out = Vec::new();
        cat_repr(&mut out, b"a\"b\\c\n\x01");
        assert_eq!(out, b"\"a\\\"b\\\\c\\n\\x01\"".to_vec());
    }

    #[test]
    fn strtoll_rules() {
        assert_eq!(strtoll_whole(b""), Some(0));
        assert_eq!(strtoll_whole(b" 12"), Some(12));
        assert_eq!(strtoll_whole(b"+3"), Some(3));
        assert_eq!(strtoll_whole(b"3 "), None);
        assert_eq!(strtoll_whole(b"-"), None);
        assert_eq!(strtoll_whole(b"99999999999999999999"), Some(i64::MAX));
    }
}
