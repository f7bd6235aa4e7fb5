//! DEBUG: the subcommands tools and Redis's own tests use, as Redis 7.0.15
//! answers them (debug.c), behind `enable-debug-command` (`no` by default,
//! as in Redis: `yes`, or `local` for loopback and Unix-socket clients).
//!
//! Subcommands that crash, leak or inspect Redis's C structures (SEGFAULT,
//! PANIC, LEAK, MALLCTL, LISTPACK, SDSLEN, …) have no meaning for hozon
//! and are refused with an error naming them; see docs/compatibility.md.

mod digest;
mod reload;

use super::{is, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;
use crate::types::Value;

/// The DEBUG family's table.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::from_docs("debug", "debug", "server", debug)];

const HELP: &[&str] = &[
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOADAOF",
    "    Write the AOF's pending batch to disk and reload the dataset from the AOF.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Accepted for compatibility (hozon's lists have no packed/plain nodes).",
    "RELOAD [option ...]",
    "    Save the snapshot on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from the snapshot.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys are an error (nothing is loaded).",
    "    * NOSAVE: the database will be loaded from an existing snapshot file.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Allow scripts to call commands flagged noscript.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RESTORE's payload.",
    "REPLICATE <command> [<arg> ...]",
    "    Send <command> to the replicas only (not the AOF, not run here): tests",
    "    of a replica's propagation-error-behavior.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRUCTSIZE",
    "    Return the size of different hozon core structures.",
];

/// Subcommands Redis has that mean nothing for hozon, and why.
const REFUSED: &[(&str, &str)] = &[
    ("segfault", "hozon does not crash on request"),
    ("panic", "hozon does not crash on request"),
    ("assert", "hozon does not crash on request"),
    ("oom", "hozon does not crash on request"),
    ("restart", "hozon does not restart itself"),
    ("crash-and-recover", "hozon does not restart itself"),
    ("leak", "hozon does not leak memory on request"),
    ("mallctl", "hozon does not use jemalloc"),
    ("mallctl-str", "hozon does not use jemalloc"),
    ("sdslen", "hozon has no SDS strings"),
    ("listpack", "hozon's values are not listpacks in memory"),
    ("quicklist", "hozon's lists are not quicklists in memory"),
    (
        "htstats",
        "hozon's hash tables keep no Redis dict statistics",
    ),
    (
        "htstats-key",
        "hozon's hash tables keep no Redis dict statistics",
    ),
    ("client-eviction", "maxmemory-clients is not implemented"),
    ("aof-flush-sleep", "not implemented"),
    (
        "replybuffer",
        "hozon's reply buffers are not resized by a cron",
    ),
    (
        "stringmatch-test",
        "not implemented (the glob matcher has its own tests)",
    ),
    ("config-rewrite-force-all", "not implemented"),
    ("drop-cluster-packet-filter", "hozon has no cluster mode"),
    ("clusterlink", "hozon has no cluster mode"),
];

/// The `enable-debug-command` refusal (Redis's processCommand text).
pub const NOT_ALLOWED_ERR: &str =
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", \
     you can run it from a local connection, otherwise you need to set this option in the \
     configuration file, and then restart the server.";

fn debug(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.core.config.enable_debug_command == crate::config::PROTECTED_LOCAL && !is_local(ctx) {
        return Err(Reply::err(NOT_ALLOWED_ERR));
    }
    let sub = argv[1];
    let n = argv.len();
    if n == 2 && is(sub, "help") {
        return Ok(super::server::help_reply(argv, HELP));
    }
    if let Some((name, why)) = REFUSED.iter().find(|(name, _)| is(sub, name)) {
        return Err(Reply::error(format!(
            "ERR DEBUG {} is not supported by hozon: {why}",
            name.to_ascii_uppercase()
        )));
    }
    match () {
        () if is(sub, "digest") && n == 2 => {
            let digest = digest::dataset_digest(ctx.core.keyspace.iter());
            Ok(Reply::Simple(digest::hex(&digest).into()))
        }
        () if is(sub, "digest-value") => {
            let db = ctx.core.keyspace.db(ctx.session.db);
            Ok(Reply::Array(
                argv[2..]
                    .iter()
                    .map(|key| Reply::Simple(digest::hex(&digest::key_digest(db, key)).into()))
                    .collect(),
            ))
        }
        () if is(sub, "replicate") && n >= 3 => {
            // Redis's DEBUG REPLICATE: into the replication stream only,
            // with no database selected for it.
            ctx.core.repl.log_dbless(&argv[2..]);
            Ok(Reply::ok())
        }
        () if is(sub, "sleep") && n == 3 => {
            let seconds = strtod(argv[2]);
            if seconds > 0.0 {
                let micros = (seconds * 1e6) as u64;
                std::thread::sleep(std::time::Duration::from_micros(micros));
            }
            Ok(Reply::ok())
        }
        () if is(sub, "loadaof") && n == 2 => {
            // The engine reloads after the command (engine/load_aof.rs).
            ctx.core.debug.load_aof = true;
            ctx.log_nothing();
            Ok(Reply::ok())
        }
        () if is(sub, "set-active-expire") && n == 3 => {
            ctx.core.debug.active_expire = atoi(argv[2]) != 0;
            Ok(Reply::ok())
        }
        () if is(sub, "pause-cron") && n == 3 => {
            ctx.core.debug.pause_cron = atoi(argv[2]) != 0;
            Ok(Reply::ok())
        }
        () if is(sub, "set-disable-deny-scripts") && n == 3 => {
            ctx.core.debug.allow_noscript_in_scripts = atoi(argv[2]) != 0;
            Ok(Reply::ok())
        }
        () if is(sub, "set-skip-checksum-validation") && n == 3 => {
            ctx.core.debug.skip_checksum_validation = atoi(argv[2]) != 0;
            Ok(Reply::ok())
        }
        () if is(sub, "quicklist-packed-threshold") && n == 3 => {
            match crate::config::parse_memory(argv[2]) {
                Some(size) if size <= (1 << 32) - (1 << 20) => Ok(Reply::ok()),
                _ => Err(Reply::err(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                )),
            }
        }
        () if is(sub, "log") && n == 3 => {
            let text = format!("DEBUG LOG: {}", String::from_utf8_lossy(c_str(argv[2])));
            ctx.host.log(crate::config::LogLevel::Warning, &text);
            Ok(Reply::ok())
        }
        () if is(sub, "error") && n == 3 => {
            let text: String = String::from_utf8_lossy(argv[2])
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            Ok(Reply::Raw(format!("-{text}\r\n").into_bytes()))
        }
        () if is(sub, "structsize") && n == 2 => Ok(Reply::Bulk(
            format!(
                "bits:{} value:{} blob:{} ",
                usize::BITS,
                std::mem::size_of::<Value>(),
                std::mem::size_of::<crate::types::Blob>()
            )
            .into_bytes(),
        )),
        () if is(sub, "change-repl-id") && n == 2 => {
            ctx.host.log(
                crate::config::LogLevel::Warning,
                "Changing replication IDs after receiving DEBUG change-repl-id",
            );
            let repl = &mut ctx.core.repl;
            repl.replid = crate::repl::ids::ReplId::random();
            repl.replid2 = crate::repl::ids::ReplId::NONE;
            repl.second_replid_offset = -1;
            Ok(Reply::ok())
        }
        () if is(sub, "object") && n == 3 => object(ctx, argv[2]),
        () if is(sub, "populate") && (3..=5).contains(&n) => populate(ctx, argv),
        () if is(sub, "protocol") && n == 3 => protocol(ctx, argv[2]),
        () if is(sub, "reload") => reload::reload(ctx, argv),
        () => Err(Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&c_str(sub)[..c_str(sub).len().min(128)])
        ))),
    }
}

use super::c_str;

/// True for a client on a loopback address or a Unix socket, and for an
/// embedding program (Redis's `islocalClient`).
fn is_local(ctx: &Ctx) -> bool {
    match ctx.host.connection() {
        None => true,
        Some(c) => {
            c.addr.starts_with("127.") || c.addr.starts_with("[::1]") || c.addr.starts_with('/')
        }
    }
}

/// C's `atoi`: the leading decimal integer, 0 when there is none.
fn atoi(arg: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(c_str(arg));
    let t = text.trim_start();
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse::<i64>().unwrap_or(0)
}

/// C's `strtod`, leniently: the longest leading prefix that is a number,
/// 0 when there is none.
fn strtod(arg: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(c_str(arg));
    let t = text.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&end| t.is_char_boundary(end))
        .find_map(|end| t[..end].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// DEBUG OBJECT: Redis's status line. The address is the value's, the
/// serialized length what DUMP would write for it (without the type byte
/// and footer, as Redis's `rdbSavedObjectLen`).
fn object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let encoder = ctx.core.rdb_encoder();
    let db = ctx.core.keyspace.db(ctx.session.db);
    let Some(value) = db.get(key) else {
        return Err(Reply::err("ERR no such key"));
    };
    let serialized = crate::rdb::writer::dump_payload(&encoder, value).len() - 11;
    let shared_int =
        |s: &[u8]| crate::types::num::parse_i64(s).is_some_and(|n| (0..10_000).contains(&n));
    let refcount = match value {
        // Redis's shared integers (OBJECT REFCOUNT says the same).
        Value::Str(s) if value.encoding() == "int" && shared_int(s) => i32::MAX,
        _ => 1,
    };
    let mut extra = String::new();
    if let Value::List(list) = value {
        // The quicklist Redis would hold (hozon's chunks are its own).
        let nodes = encoder.quicklist_layout(list);
        let count = nodes.len().max(1);
        extra = format!(
            " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 \
             ql_uncompressed_size:{}",
            nodes.len(),
            list.len() as f64 / count as f64,
            ctx.core.config.limits.list_max_listpack_size,
            nodes.iter().map(|&(_, size)| size).sum::<usize>()
        );
    }
    // The key's 24-bit access field and the idle time it gives (Redis
    // prints both whatever the policy).
    let lru = db.access(key).unwrap_or(0);
    let idle = ctx.core.idle_seconds(lru, ctx.now_ms);
    Ok(Reply::Simple(
        format!(
            "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{serialized} lru:{lru} \
             lru_seconds_idle:{idle}{extra}",
            value as *const Value,
            value.encoding()
        )
        .into(),
    ))
}

/// Redis's `getPositiveLongFromObjectOrReply`: one error for anything
/// but a non-negative integer.
fn positive_long(arg: &[u8]) -> Result<i64, Reply> {
    crate::types::num::parse_i64(arg)
        .filter(|&n| n >= 0)
        .ok_or(Reply::err("ERR value is out of range, must be positive"))
}

/// DEBUG POPULATE count [prefix] [size]: string keys `prefix:N` holding
/// `value:N` (cut or zero-padded to `size` when given); existing keys are
/// left alone. Unlike Redis, the keys are logged as SETs (to the AOF and
/// replicas): hozon does not hold data its log does not.
fn populate(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let count = positive_long(argv[2])?;
    let size = match argv.get(4) {
        Some(arg) => Some(positive_long(arg)? as usize).filter(|&s| s > 0),
        None => None,
    };
    let prefix = argv.get(3).map_or(b"key".as_slice(), |p| c_str(p));
    let mut added = 0;
    for j in 0..count {
        let mut key = prefix.to_vec();
        key.extend_from_slice(format!(":{j}").as_bytes());
        if ctx.lookup_write(&key).is_some() {
            continue;
        }
        let mut value = format!("value:{j}").into_bytes();
        if let Some(size) = size {
            value.resize(size, 0);
        }
        ctx.log(vec![b"SET".to_vec(), key.clone(), value.clone()]);
        let value = Value::Str(crate::types::Blob::from_vec(value));
        ctx.set_key(&key, value, false);
        added += 1;
    }
    ctx.dirty(added);
    if added == 0 {
        ctx.log_nothing();
    }
    Ok(Reply::ok())
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type.
fn protocol(ctx: &mut Ctx, name: &[u8]) -> CmdResult {
    let resp3 = ctx.session.resp >= 3;
    let ints = || (0..3).map(Reply::Int).collect::<Vec<_>>();
    Ok(match () {
        () if is(name, "string") => Reply::Bulk(b"Hello World".to_vec()),
        () if is(name, "integer") => Reply::Int(12345),
        // Redis's test value (not pi).
        #[allow(clippy::approx_constant)]
        () if is(name, "double") => Reply::Double(3.141),
        () if is(name, "bignum") => {
            Reply::BigNumber("1234567999999999999999999999999999999".to_string())
        }
        () if is(name, "null") => Reply::Null,
        () if is(name, "array") => Reply::Array(ints()),
        () if is(name, "set") => Reply::Set(ints()),
        () if is(name, "map") => Reply::Map(
            (0..3)
                .map(|j| (Reply::Int(j), Reply::Bool(j == 1)))
                .collect(),
        ),
        () if is(name, "attrib") => {
            let real = Reply::Bulk(b"Some real reply following the attribute".to_vec());
            if !resp3 {
                real
            } else {
                Reply::Frames(vec![
                    Reply::Raw(
                        b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n".to_vec(),
                    ),
                    real,
                ])
            }
        }
        () if is(name, "push") => {
            if !resp3 {
                return Err(Reply::err("ERR RESP2 is not supported by this command"));
            }
            Reply::Frames(vec![
                Reply::Push(vec![
                    Reply::Bulk(b"server-cpu-usage".to_vec()),
                    Reply::Int(42),
                ]),
                Reply::Bulk(b"Some real reply following the push reply".to_vec()),
            ])
        }
        () if is(name, "true") => Reply::Bool(true),
        () if is(name, "false") => Reply::Bool(false),
        () if is(name, "verbatim") => {
            Reply::Verbatim(*b"txt", b"This is a verbatim\nstring".to_vec())
        }
        () => {
            return Err(Reply::err(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    })
}
