//! The parameter table: every parameter once, with its parsing and
//! validation (Redis's error texts).

use super::*;

/// CONFIG SET refuses the parameter (`can't set immutable config`).
pub const IMMUTABLE: u8 = 1;
/// CONFIG SET refuses the parameter for safety (`can't set protected
/// config`): where data files go must not be changeable over the network.
pub const PROTECTED: u8 = 2;
/// The value is a list of words (`save`, `bind`).
pub const MULTI_ARG: u8 = 4;
/// Left out of CONFIG GET's patterns (Redis's `HIDDEN_CONFIG`: settings
/// for tests, named exactly).
pub const HIDDEN: u8 = 8;

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
    pub(super) reading_file: bool,
    pub(super) save_seen: bool,
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

/// A directive hozon accepts without acting on it (`config::ops::INERT`):
/// `yes`/`no`, its value kept for CONFIG GET.
macro_rules! inert_bool {
    ($name:expr, $alias:expr, $flags:expr, $default:expr) => {
        Param {
            name: $name,
            alias: $alias,
            flags: $flags,
            default: $default,
            kind: Kind::Bool {
                get: |c| c.ops.inert_value($name) == b"yes",
                set: |c, v| c.ops.set_inert($name, if v { b"yes" } else { b"no" }),
            },
            unsupported: None,
        }
    };
}

/// An integer directive hozon accepts without acting on it.
macro_rules! inert_int {
    ($name:expr, $flags:expr, $default:expr, $min:expr, $max:expr) => {
        Param {
            name: $name,
            alias: None,
            flags: $flags,
            default: $default,
            kind: Kind::Int {
                min: $min as i128,
                max: $max as i128,
                memory: false,
                unsigned: false,
                get: |c| {
                    String::from_utf8_lossy(c.ops.inert_value($name))
                        .parse::<i128>()
                        .unwrap_or(0)
                },
                set: |c, v| c.ops.set_inert($name, v.to_string().as_bytes()),
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
    int_param!("io-threads", None, IMMUTABLE, "1", 1, 128, false, false, |c| c.io_threads, |c, v| c.io_threads = v as usize),
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
    bool_param!("repl-diskless-sync", None, 0, "yes", repl_diskless_sync),
    bool_param!("repl-disable-tcp-nodelay", None, 0, "no", repl_disable_tcp_nodelay),
    int_param!("repl-diskless-sync-delay", None, 0, "5", 0, INT_MAX, false, false, |c| c.repl.diskless_sync_delay_s, |c, v| c.repl.diskless_sync_delay_s = v as u64),
    int_param!("repl-diskless-sync-max-replicas", None, 0, "0", 0, INT_MAX, false, false, |c| c.repl.diskless_sync_max_replicas, |c, v| c.repl.diskless_sync_max_replicas = v as u64),
    int_param!("repl-backlog-size", None, 0, "1048576", 1, LONG_MAX, true, false, |c| c.repl.backlog_size, |c, v| c.repl.backlog_size = v as u64),
    int_param!("repl-backlog-ttl", None, 0, "3600", 0, LONG_MAX, false, false, |c| c.repl.backlog_ttl_s, |c, v| c.repl.backlog_ttl_s = v as u64),
    int_param!("repl-ping-replica-period", Some("repl-ping-slave-period"), 0, "10", 1, INT_MAX, false, false, |c| c.repl.ping_replica_period_s, |c, v| c.repl.ping_replica_period_s = v as u64),
    int_param!("shutdown-timeout", None, 0, "10", 0, INT_MAX, false, false, |c| c.repl.shutdown_timeout_s, |c, v| c.repl.shutdown_timeout_s = v as u64),
    Param {
        name: "masterauth",
        alias: None,
        flags: 0,
        default: "",
        kind: Kind::Str {
            get: |c| c.replica.masterauth.clone().unwrap_or_default(),
            set: |c, v| {
                c.replica.masterauth = if v.is_empty() { None } else { Some(v.to_vec()) };
                Ok(())
            },
        },
        unsupported: None,
    },
    Param {
        name: "replica-announce-ip",
        alias: Some("slave-announce-ip"),
        flags: 0,
        default: "",
        kind: Kind::Str {
            get: |c| c.replica.announce_ip.clone().unwrap_or_default(),
            set: |c, v| {
                c.replica.announce_ip = if v.is_empty() { None } else { Some(v.to_vec()) };
                Ok(())
            },
        },
        unsupported: None,
    },
    int_param!("replica-announce-port", Some("slave-announce-port"), 0, "0", 0, 65535, false, false, |c| c.replica.announce_port, |c, v| c.replica.announce_port = v as u16),
    Param {
        name: "masteruser",
        alias: None,
        flags: 0,
        default: "",
        kind: Kind::Str {
            get: |c| c.replica.masteruser.clone().unwrap_or_default(),
            set: |c, v| {
                c.replica.masteruser = if v.is_empty() { None } else { Some(v.to_vec()) };
                Ok(())
            },
        },
        unsupported: None,
    },
    Param {
        name: "replica-read-only",
        alias: Some("slave-read-only"),
        flags: 0,
        default: "yes",
        kind: Kind::Bool {
            get: |c| c.replica.read_only,
            set: |c, v| c.replica.read_only = v,
        },
        unsupported: None,
    },
    Param {
        name: "replica-serve-stale-data",
        alias: Some("slave-serve-stale-data"),
        flags: 0,
        default: "yes",
        kind: Kind::Bool {
            get: |c| c.replica.serve_stale_data,
            set: |c, v| c.replica.serve_stale_data = v,
        },
        unsupported: None,
    },
    Param {
        name: "replica-announced",
        alias: None,
        flags: 0,
        default: "yes",
        kind: Kind::Bool {
            get: |c| c.replica.announced,
            set: |c, v| c.replica.announced = v,
        },
        unsupported: None,
    },
    Param {
        name: "repl-diskless-load",
        alias: None,
        flags: 0,
        default: "disabled",
        kind: Kind::Enum {
            values: replica::DisklessLoad::WORDS,
            get: |c| c.replica.diskless_load.index(),
            set: |c, i| c.replica.diskless_load = replica::DisklessLoad::from_index(i),
        },
        unsupported: None,
    },
    Param {
        name: "propagation-error-behavior",
        alias: None,
        flags: 0,
        default: "ignore",
        kind: Kind::Enum {
            values: replica::PROPAGATION_ERROR_BEHAVIORS,
            get: |c| c.replica.propagation_error_behavior,
            set: |c, i| c.replica.propagation_error_behavior = i,
        },
        unsupported: None,
    },
    int_param!("replica-priority", Some("slave-priority"), 0, "100", 0, INT_MAX, false, false, |c| c.replica.priority, |c, v| c.replica.priority = v as u64),
    int_param!("repl-timeout", None, 0, "60", 1, INT_MAX, false, false, |c| c.repl.timeout_s, |c, v| c.repl.timeout_s = v as u64),
    int_param!("min-replicas-to-write", Some("min-slaves-to-write"), 0, "0", 0, INT_MAX, false, false, |c| c.repl.min_replicas_to_write, |c, v| c.repl.min_replicas_to_write = v as u64),
    int_param!("min-replicas-max-lag", Some("min-slaves-max-lag"), 0, "10", 0, INT_MAX, false, false, |c| c.repl.min_replicas_max_lag_s, |c, v| c.repl.min_replicas_max_lag_s = v as u64),
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
        unsupported: None,
    },
    // TLS (config/tls.rs, docs/security.md "TLS").
    super::tls::TLS_PORT,
    super::tls::TLS_CERT_FILE,
    super::tls::TLS_KEY_FILE,
    super::tls::TLS_KEY_FILE_PASS,
    super::tls::TLS_CLIENT_CERT_FILE,
    super::tls::TLS_CLIENT_KEY_FILE,
    super::tls::TLS_CLIENT_KEY_FILE_PASS,
    super::tls::TLS_DH_PARAMS_FILE,
    super::tls::TLS_CA_CERT_FILE,
    super::tls::TLS_CA_CERT_DIR,
    super::tls::TLS_AUTH_CLIENTS,
    super::tls::TLS_PROTOCOLS,
    super::tls::TLS_CIPHERS,
    super::tls::TLS_CIPHERSUITES,
    super::tls::TLS_PREFER_SERVER_CIPHERS,
    super::tls::TLS_SESSION_CACHING,
    super::tls::TLS_SESSION_CACHE_SIZE,
    super::tls::TLS_SESSION_CACHE_TIMEOUT,
    super::tls::TLS_REPLICATION,
    super::tls::TLS_CLUSTER,
    // Operations (config/ops_params.rs, docs/operations.md).
    super::acl::ACLFILE,
    super::acl::ACL_PUBSUB_DEFAULT,
    ops_params::UNIXSOCKET,
    ops_params::UNIXSOCKETPERM,
    ops_params::PIDFILE,
    ops_params::SYSLOG_ENABLED,
    ops_params::SYSLOG_IDENT,
    ops_params::SYSLOG_FACILITY,
    ops_params::SUPERVISED,
    int_param!("tcp-backlog", None, IMMUTABLE, "511", 0, INT_MAX, false, false, |c| c.ops.tcp_backlog, |c, v| c.ops.tcp_backlog = v as u32),
    ops_params::DISABLE_THP,
    ops_params::AOF_USE_RDB_PREAMBLE,
    inert_bool!("always-show-logo", None, IMMUTABLE, "no"),
    inert_bool!("set-proc-title", None, IMMUTABLE, "yes"),
    ops_params::PROC_TITLE_TEMPLATE,
    inert_bool!("rdb-del-sync-files", None, 0, "no"),
    int_param!("acllog-max-len", None, 0, "128", 0, LONG_MAX, false, false, |c| c.acllog_max_len, |c, v| c.acllog_max_len = v as u64),
    inert_bool!("lazyfree-lazy-eviction", None, 0, "no"),
    inert_bool!("lazyfree-lazy-expire", None, 0, "no"),
    inert_bool!("lazyfree-lazy-server-del", None, 0, "no"),
    inert_bool!("lazyfree-lazy-user-del", None, 0, "no"),
    inert_bool!("lazyfree-lazy-user-flush", None, 0, "no"),
    inert_bool!("replica-lazy-flush", Some("slave-lazy-flush"), 0, "no"),
    ops_params::OOM_SCORE_ADJ,
    ops_params::OOM_SCORE_ADJ_VALUES,
    ops_params::APPENDDIRNAME,
    inert_bool!("aof-timestamp-enabled", None, 0, "no"),
    inert_int!("list-compress-depth", 0, "0", 0, INT_MAX),
    inert_bool!("activerehashing", None, 0, "yes"),
    inert_bool!("dynamic-hz", None, 0, "yes"),
    inert_bool!("rdb-save-incremental-fsync", None, 0, "yes"),
    inert_bool!("jemalloc-bg-thread", None, 0, "yes"),
    int_param!("proto-max-bulk-len", None, 0, "536870912", MB, LONG_MAX, true, false, |c| c.proto_max_bulk_len, |c, v| c.proto_max_bulk_len = v as u64),
    int_param!("client-query-buffer-limit", None, 0, "1073741824", MB, LONG_MAX, true, true, |c| c.client_query_buffer_limit, |c, v| c.client_query_buffer_limit = v as u64),
    int_param!("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), 0, "512", 0, LONG_MAX, false, true, |c| c.limits.hash_max_listpack_entries, |c, v| c.limits.hash_max_listpack_entries = v as usize),
    int_param!("hash-max-listpack-value", Some("hash-max-ziplist-value"), 0, "64", 0, LONG_MAX, true, true, |c| c.limits.hash_max_listpack_value, |c, v| c.limits.hash_max_listpack_value = v as usize),
    int_param!("set-max-intset-entries", None, 0, "512", 0, LONG_MAX, false, true, |c| c.limits.set_max_intset_entries, |c, v| c.limits.set_max_intset_entries = v as usize),
    int_param!("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), 0, "128", 0, LONG_MAX, false, true, |c| c.limits.zset_max_listpack_entries, |c, v| c.limits.zset_max_listpack_entries = v as usize),
    int_param!("zset-max-listpack-value", Some("zset-max-ziplist-value"), 0, "64", 0, LONG_MAX, true, true, |c| c.limits.zset_max_listpack_value, |c, v| c.limits.zset_max_listpack_value = v as usize),
    int_param!("hll-sparse-max-bytes", None, 0, "3000", 0, LONG_MAX, true, true, |c| c.hll_sparse_max_bytes, |c, v| c.hll_sparse_max_bytes = v as u64),
    int_param!("stream-node-max-bytes", None, 0, "4096", 0, LONG_MAX, true, true, |c| c.stream_node_max_bytes, |c, v| c.stream_node_max_bytes = v as u64),
    int_param!("stream-node-max-entries", None, 0, "100", 0, LONG_MAX, false, false, |c| c.stream_node_max_entries, |c, v| c.stream_node_max_entries = v as u64),
    Param {
        name: "enable-debug-command",
        alias: None,
        flags: IMMUTABLE,
        default: "no",
        kind: Kind::Enum {
            values: &["no", "yes", "local"],
            get: |c| c.enable_debug_command,
            set: |c, i| c.enable_debug_command = i,
        },
        unsupported: None,
    },
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
        unsupported: None,
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
    int_param!("maxmemory-samples", None, 0, "5", 1, 64, false, false, |c| c.maxmemory_samples, |c, v| c.maxmemory_samples = v as u32),
    int_param!("maxmemory-eviction-tenacity", None, 0, "10", 0, 100, false, false, |c| c.maxmemory_eviction_tenacity, |c, v| c.maxmemory_eviction_tenacity = v as u32),
    int_param!("lfu-log-factor", None, 0, "10", 0, INT_MAX, false, false, |c| c.lfu_log_factor, |c, v| c.lfu_log_factor = v as u64),
    int_param!("lfu-decay-time", None, 0, "1", 0, INT_MAX, false, false, |c| c.lfu_decay_time, |c, v| c.lfu_decay_time = v as u64),
    bool_param!("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), 0, "yes", replica_ignore_maxmemory),
    int_param!("loading-process-events-interval-bytes", None, HIDDEN, "2097152", 1024, INT_MAX, false, false, |c| c.loading_process_events_interval_bytes, |c, v| c.loading_process_events_interval_bytes = v as i32),
    int_param!("key-load-delay", None, HIDDEN, "0", INT_MIN, INT_MAX, false, false, |c| c.key_load_delay, |c, v| c.key_load_delay = v as i32),
    int_param!("rdb-key-save-delay", None, HIDDEN, "0", INT_MIN, INT_MAX, false, false, |c| c.rdb_key_save_delay, |c, v| c.rdb_key_save_delay = v as i32),
    int_param!("busy-reply-threshold", Some("lua-time-limit"), 0, "5000", 0, LONG_MAX, false, false, |c| c.busy_reply_threshold_ms, |c, v| c.busy_reply_threshold_ms = v as u64),
    Param {
        name: "notify-keyspace-events",
        alias: None,
        flags: 0,
        default: "",
        kind: Kind::Str {
            get: |c| notify::render_classes(c.notify_keyspace_events),
            set: |c, v| {
                c.notify_keyspace_events =
                    notify::parse_classes(v).ok_or(notify::INVALID_CLASS)?;
                Ok(())
            },
        },
        unsupported: None,
    },
    int_param!("tracking-table-max-keys", None, 0, "1000000", 0, LONG_MAX, false, false, |c| c.tracking_table_max_keys, |c, v| c.tracking_table_max_keys = v as u64),
    int_param!("busy-poll-us", None, 0, "0", 0, 10000, false, false, |c| c.busy_poll_us, |c, v| c.busy_poll_us = v as u64),
    int_param!("slowlog-log-slower-than", None, 0, "10000", -1, LONG_MAX, false, false, |c| c.slowlog_log_slower_than, |c, v| c.slowlog_log_slower_than = v as i64),
    int_param!("slowlog-max-len", None, 0, "128", 0, LONG_MAX, false, true, |c| c.slowlog_max_len, |c, v| c.slowlog_max_len = v as u64),
    int_param!("latency-monitor-threshold", None, 0, "0", 0, LONG_MAX, false, false, |c| c.latency_monitor_threshold, |c, v| c.latency_monitor_threshold = v as u64),
    bool_param!("latency-tracking", None, 0, "yes", latency_tracking),
    Param {
        name: "latency-tracking-info-percentiles",
        alias: None,
        flags: MULTI_ARG,
        default: "50 99 99.9",
        kind: Kind::Special {
            get: |c| render_percentiles(&c.latency_tracking_info_percentiles).into_bytes(),
            set: set_percentiles,
        },
        unsupported: None,
    },
];

/// `latency-tracking-info-percentiles` as CONFIG GET shows it (`%f` with
/// the trailing zeros trimmed, Redis's `trimDoubleString`).
pub fn render_percentiles(values: &[f64]) -> String {
    values
        .iter()
        .map(|p| trim_double(&format!("{p:.6}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Redis's `trimDoubleString`: trailing zeros (and a trailing dot) of a
/// number with a decimal point removed.
pub fn trim_double(text: &str) -> String {
    if !text.contains('.') {
        return text.to_string();
    }
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Redis's `setConfigLatencyTrackingInfoPercentilesOutputOption`: every
/// word a number within [0, 100]; one empty word means none.
fn set_percentiles(c: &mut Config, args: &[&[u8]], _: &mut LoadState) -> Result<(), String> {
    if args.len() == 1 && args[0].is_empty() {
        c.latency_tracking_info_percentiles = Vec::new();
        return Ok(());
    }
    let mut values = Vec::with_capacity(args.len());
    for arg in args {
        let value = std::str::from_utf8(arg)
            .ok()
            .and_then(|t| crate::types::num::parse_f64(t.as_bytes()))
            .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&value) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        values.push(value);
    }
    c.latency_tracking_info_percentiles = values;
    Ok(())
}

/// Redis 7.0 parameters hozon does not implement, so a configuration
/// written for Redis gets a precise refusal instead of "bad directive".
#[rustfmt::skip]
pub(super) const REDIS_ONLY_PARAMS: &[&str] = &[
    "io-threads-do-reads", 
    
    
    "cluster-require-full-coverage", 
    "cluster-replica-no-failover", "cluster-slave-no-failover", 
    
    "activedefrag", 
    "cluster-enabled", "cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down", "crash-log-enabled",
    "crash-memcheck-enabled", "cluster-allow-replica-migration", 
    "aof-disable-auto-gc", "replica-ignore-disk-write-errors", 
    "cluster-announce-ip",
    "cluster-config-file", "cluster-announce-hostname", "server_cpulist",
    "bio_cpulist", "aof_rewrite_cpulist", "bgsave_cpulist", "ignore-warnings", 
    "bind-source-addr", 
    "sanitize-dump-payload", "enable-protected-configs",     "enable-module-command", "cluster-preferred-endpoint-type", "shutdown-on-sigint",
    "shutdown-on-sigterm", "cluster-replica-validity-factor",
    "cluster-slave-validity-factor", "cluster-migration-barrier", "active-defrag-cycle-min",
    "active-defrag-cycle-max", "active-defrag-threshold-lower", "active-defrag-threshold-upper", "cluster-port",
    "cluster-announce-bus-port", "cluster-announce-port", "cluster-announce-tls-port", 
      "active-expire-effort",
    "socket-mark-id",
    "active-defrag-max-scan-fields", "cluster-node-timeout",
    
    "cluster-link-sendbuf-limit", "active-defrag-ignore-bytes",     "maxmemory-clients", 
    
    "loadmodule",
];

/// Directives Redis still accepts and ignores (with their argument count).
pub(super) const DEPRECATED: &[&str] = &[
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

pub(super) fn default_args(param: &Param) -> Vec<Vec<u8>> {
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

pub(super) fn is_base_name(name: &[u8]) -> bool {
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
pub(super) fn strtoll_whole(s: &[u8]) -> Option<i64> {
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
pub(super) fn memtoull(s: &[u8]) -> Option<i64> {
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
