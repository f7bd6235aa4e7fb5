//! Connection and server commands: PING ECHO SELECT HELLO AUTH QUIT RESET
//! CLIENT COMMAND INFO CONFIG TIME SHUTDOWN.
//!
//! Replies follow Redis 7.0.15 byte for byte. A few values are ours by
//! nature (INFO's process facts, CLIENT LIST's addresses and buffer sizes)
//! and are documented where they are produced. Two things are reported as
//! Redis reports them on purpose: HELLO and INFO say `redis` 7.0.15,
//! because client libraries switch features on that version.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use super::ctx::Connection;
use super::docs::{self, BeginSearch, Doc, FindKeys};
use super::{flags::*, is, CmdResult, CommandSpec, Ctx, Session};
use crate::config::{self, CommandName, CommandRenames, Config, LoadState};
use crate::reply::Reply;

/// The Redis version hozon is compatible with, reported to clients.
pub const REDIS_VERSION: &str = "7.0.15";

macro_rules! spec {
    ($name:expr, $arity:expr, $flags:expr, $group:expr, $handler:expr) => {
        spec!($name, $arity, $flags, $group, $handler, &[])
    };
    ($name:expr, $arity:expr, $flags:expr, $group:expr, $handler:expr, $subs:expr) => {
        CommandSpec {
            subcommands: $subs,
            ..CommandSpec::new($name, $arity, $flags, (0, 0, 0), $group, $handler)
        }
    };
}

/// A subcommand spec whose handler first records the full name
/// (`client|list`) as the client's last command, which CLIENT LIST shows
/// (the dispatcher records the subcommand's own name only).
macro_rules! sub {
    ($name:expr, $full:expr, $arity:expr, $flags:expr, $group:expr, $handler:expr) => {
        spec!($name, $arity, $flags, $group, {
            fn with_full_name(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
                ctx.session.last_command = $full;
                $handler(ctx, argv)
            }
            with_full_name
        })
    };
}

const CONN: u32 = NOSCRIPT | LOADING | STALE;

/// The connection/server family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec!("ping", -1, FAST, "connection", ping),
    spec!("echo", 2, LOADING | STALE | FAST, "connection", echo),
    spec!("select", 2, LOADING | STALE | FAST, "connection", select),
    spec!(
        "hello",
        -1,
        CONN | FAST | NO_AUTH | ALLOW_BUSY,
        "connection",
        hello
    ),
    spec!(
        "auth",
        -2,
        CONN | FAST | NO_AUTH | ALLOW_BUSY,
        "connection",
        auth
    ),
    spec!(
        "quit",
        -1,
        CONN | FAST | NO_AUTH | ALLOW_BUSY,
        "connection",
        quit
    ),
    spec!(
        "reset",
        1,
        CONN | FAST | NO_AUTH | ALLOW_BUSY,
        "connection",
        reset
    ),
    spec!(
        "client",
        -2,
        NONE,
        "connection",
        super::container_handler,
        CLIENT_SUBCOMMANDS
    ),
    // COMMAND runs without a subcommand too (the whole table), which the
    // dispatcher does not do for containers: it dispatches its own
    // subcommands (COMMAND_SUBCOMMANDS).
    spec!("command", -1, LOADING | STALE, "server", command),
    spec!("info", -1, LOADING | STALE, "server", info),
    spec!(
        "config",
        -2,
        NONE,
        "server",
        super::container_handler,
        CONFIG_SUBCOMMANDS
    ),
    spec!("time", 1, LOADING | STALE | FAST, "server", time),
    spec!(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        "server",
        shutdown
    ),
];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    sub!(
        "getname",
        "client|getname",
        2,
        CONN,
        "connection",
        client_getname
    ),
    sub!(
        "help",
        "client|help",
        2,
        LOADING | STALE,
        "connection",
        client_help
    ),
    sub!("id", "client|id", 2, CONN, "connection", client_id),
    sub!("info", "client|info", 2, CONN, "connection", client_info),
    sub!(
        "kill",
        "client|kill",
        -3,
        ADMIN | CONN,
        "connection",
        client_kill
    ),
    sub!(
        "list",
        "client|list",
        -2,
        ADMIN | CONN,
        "connection",
        client_list
    ),
    sub!(
        "no-evict",
        "client|no-evict",
        3,
        ADMIN | CONN,
        "connection",
        client_no_evict
    ),
    sub!("reply", "client|reply", 3, CONN, "connection", client_reply),
    sub!(
        "unblock",
        "client|unblock",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE | CONN,
        "connection",
        client_unblock
    ),
    sub!(
        "setname",
        "client|setname",
        3,
        CONN,
        "connection",
        client_setname
    ),
];

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    sub!(
        "count",
        "command|count",
        2,
        LOADING | STALE,
        "server",
        command_count
    ),
    sub!(
        "docs",
        "command|docs",
        -2,
        LOADING | STALE,
        "server",
        command_docs
    ),
    sub!(
        "getkeys",
        "command|getkeys",
        -4,
        LOADING | STALE,
        "server",
        command_getkeys
    ),
    sub!(
        "getkeysandflags",
        "command|getkeysandflags",
        -4,
        LOADING | STALE,
        "server",
        command_getkeysandflags
    ),
    sub!(
        "help",
        "command|help",
        2,
        LOADING | STALE,
        "server",
        command_help
    ),
    sub!(
        "info",
        "command|info",
        -2,
        LOADING | STALE,
        "server",
        command_info
    ),
    sub!(
        "list",
        "command|list",
        -2,
        LOADING | STALE,
        "server",
        command_list
    ),
];

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    sub!(
        "get",
        "config|get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        config_get
    ),
    sub!(
        "help",
        "config|help",
        2,
        LOADING | STALE,
        "server",
        config_help
    ),
    sub!(
        "resetstat",
        "config|resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        config_resetstat
    ),
    sub!(
        "rewrite",
        "config|rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        config_rewrite
    ),
    sub!(
        "set",
        "config|set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "server",
        config_set
    ),
];

/// The subcommands of `spec`, including COMMAND's own.
fn subcommands_of(spec: &CommandSpec) -> &'static [CommandSpec] {
    if spec.name == "command" {
        COMMAND_SUBCOMMANDS
    } else {
        spec.subcommands
    }
}

/// A HELP reply: Redis's header with the command name as typed
/// (upper-cased), the lines, and the HELP footer.
pub(crate) fn help_reply(argv: &[&[u8]], lines: &[&'static str]) -> Reply {
    let name = String::from_utf8_lossy(argv[0]).to_ascii_uppercase();
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::Simple(
        format!("{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").into(),
    ));
    out.extend(lines.iter().map(|l| Reply::simple(l)));
    out.push(Reply::simple("HELP"));
    out.push(Reply::simple("    Prints this help."));
    Reply::Array(out)
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// PING ECHO SELECT TIME QUIT

fn ping(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if ctx.session.resp == 2 && ctx.session.subscribed() {
        // RESP2 subscribed mode: replies are arrays like messages.
        let payload = argv.get(1).map_or(Vec::new(), |a| a.to_vec());
        return match argv.len() {
            1 | 2 => Ok(Reply::Array(vec![
                Reply::bulk(b"pong"),
                Reply::Bulk(payload),
            ])),
            _ => Err(super::arity_error("ping")),
        };
    }
    match argv.len() {
        1 => Ok(Reply::simple("PONG")),
        2 => Ok(Reply::bulk(argv[1])),
        _ => Err(super::arity_error("ping")),
    }
}

fn echo(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::bulk(argv[1]))
}

fn select(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Redis reads the index as a C int: anything outside is "not an integer".
    let index = super::parse_int(argv[1])?;
    if i32::try_from(index).is_err() {
        return Err(Reply::err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if index < 0 || index as usize >= ctx.core.keyspace.db_count() {
        return Err(Reply::err("ERR DB index is out of range"));
    }
    ctx.session.db = index as usize;
    Ok(Reply::ok())
}

fn time(_ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let us = now_us();
    Ok(Reply::Array(vec![
        Reply::Bulk(us.div_euclid(1_000_000).to_string().into_bytes()),
        Reply::Bulk(us.rem_euclid(1_000_000).to_string().into_bytes()),
    ]))
}

fn quit(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.session.close_after_reply = true;
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------
// AUTH HELLO RESET

/// Compares two secrets in time that depends on their lengths only, never
/// on where they first differ (a password must not leak byte by byte
/// through response timing).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// Redis's ACL check for the only user hozon has, `default`: any password
/// is accepted when no `requirepass` is set (the user is `nopass`).
fn credentials_ok(config: &Config, user: &[u8], password: &[u8]) -> bool {
    if user != b"default" {
        return false;
    }
    match &config.requirepass {
        None => true,
        Some(expected) => constant_time_eq(expected, password),
    }
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn auth(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return super::syntax_error();
    }
    let (user, password): (&[u8], &[u8]) = if argv.len() == 2 {
        if ctx.core.config.requirepass.is_none() {
            return Err(Reply::err(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        (b"default", argv[1])
    } else {
        (argv[1], argv[2])
    };
    if credentials_ok(&ctx.core.config, user, password) {
        ctx.session.authenticated = true;
        Ok(Reply::ok())
    } else {
        Err(Reply::err(WRONGPASS))
    }
}

/// Client names are printable ASCII without spaces (CLIENT LIST must stay
/// parseable).
fn set_client_name(session: &mut Session, name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    session.name = if name.is_empty() {
        None
    } else {
        Some(name.to_vec())
    };
    Ok(())
}

fn hello(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut version = 0;
    let mut next = 1;
    if argv.len() >= 2 {
        version = crate::types::num::parse_i64(argv[1]).ok_or(Reply::err(
            "ERR Protocol version is not an integer or out of range",
        ))?;
        next = 2;
        if !(2..=3).contains(&version) {
            return Err(Reply::err("NOPROTO unsupported protocol version"));
        }
    }
    let mut j = next;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(argv[j], "auth") && more >= 2 {
            if !credentials_ok(&ctx.core.config, argv[j + 1], argv[j + 2]) {
                return Err(Reply::err(WRONGPASS));
            }
            ctx.session.authenticated = true;
            j += 3;
        } else if is(argv[j], "setname") && more >= 1 {
            set_client_name(ctx.session, argv[j + 1])?;
            j += 2;
        } else {
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(argv[j]);
            msg.push(b'\'');
            return Err(Reply::error(super::error_text(&msg)));
        }
    }
    if !ctx.session.authenticated {
        return Err(Reply::err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if version != 0 {
        ctx.session.resp = version as u8;
    }
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    Ok(Reply::Map(vec![
        (text("server"), text("redis")),
        (text("version"), text(REDIS_VERSION)),
        (text("proto"), Reply::Int(i64::from(ctx.session.resp))),
        (text("id"), Reply::Int(ctx.session.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ]))
}

fn reset(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    // Redis's clearClientConnectionState: back to a fresh connection's
    // state (no transaction, WATCH or subscription).
    super::multi::discard_transaction(ctx.core, ctx.session);
    super::pubsub::unsubscribe_everything(ctx.core, ctx.session);
    let session = &mut *ctx.session;
    session.db = 0;
    session.resp = 2;
    session.authenticated = ctx.core.config.requirepass.is_none();
    session.name = None;
    session.reply_off = false;
    session.reply_skip = false;
    session.reply_skip_next = false;
    Ok(Reply::simple("RESET"))
}

// ---------------------------------------------------------------------------
// CLIENT

const CLIENT_HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];

fn client_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, CLIENT_HELP))
}

fn client_id(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.session.id as i64))
}

fn client_getname(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(match &ctx.session.name {
        Some(name) => Reply::bulk(name),
        None => Reply::Null,
    })
}

fn client_setname(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_client_name(ctx.session, argv[2])?;
    Ok(Reply::ok())
}

fn client_reply(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let session = &mut *ctx.session;
    if is(argv[2], "on") {
        session.reply_off = false;
        session.reply_skip = false;
        Ok(Reply::ok())
    } else if is(argv[2], "off") {
        // The reply to this very command is suppressed too.
        session.reply_off = true;
        Ok(Reply::ok())
    } else if is(argv[2], "skip") {
        if !session.reply_off {
            session.reply_skip = true;
            session.reply_skip_next = true;
        }
        Ok(Reply::ok())
    } else {
        super::syntax_error()
    }
}

fn client_unblock(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 4 {
        return Err(super::subcommand_syntax_error(argv));
    }
    let with_error = match argv.get(3) {
        None => false,
        Some(reason) if is(reason, "timeout") => false,
        Some(reason) if is(reason, "error") => true,
        Some(_) => {
            return Err(Reply::err(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = super::parse_int(argv[2])?;
    let unblocked = id >= 0 && ctx.host.unblock_client(id as u64, with_error);
    Ok(Reply::Int(i64::from(unblocked)))
}

fn client_no_evict(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[2], "on") {
        ctx.session.no_evict = true;
    } else if is(argv[2], "off") {
        ctx.session.no_evict = false;
    } else {
        return super::syntax_error();
    }
    Ok(Reply::ok())
}

/// One `CLIENT LIST` line (without the newline), as Redis's
/// `catClientInfoString` writes it. `current` carries what only the
/// running command knows about its own client: its full command name and
/// the size of its arguments.
fn client_line(
    session: &Session,
    conn: &Connection,
    now_ms: i64,
    current: Option<(&str, usize)>,
    dirty_cas: bool,
) -> String {
    let mut flags = String::new();
    if session.subscribed() {
        flags.push('P');
    }
    if session.multi.is_some() {
        flags.push('x');
    }
    if session.blocked.is_some() {
        flags.push('b');
    }
    if dirty_cas {
        flags.push('d');
    }
    if session.close_after_reply {
        flags.push('c');
    }
    if session.no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let name = session
        .name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let (cmd, argv_mem) = match current {
        Some((cmd, argv_mem)) => (cmd.to_string(), argv_mem),
        None => (session.last_command.to_string(), 0),
    };
    // rbs/rbp: hozon has one growable output buffer per client; it is
    // reported as both the reply buffer size and its peak.
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem=0 rbs={} rbp={} obl=0 oll=0 omem={} tot-mem={} events={} cmd={} user=default redir=-1 resp={}",
        session.id,
        conn.addr,
        conn.laddr,
        conn.fd,
        name,
        (now_ms - session.created_ms).max(0) / 1000,
        (now_ms - conn.last_interaction_ms).max(0) / 1000,
        flags,
        session.db,
        session.channels.len(),
        session.patterns.len(),
        session.shard_channels.len(),
        session.multi.as_ref().map_or(-1, |m| m.commands.len() as i64),
        conn.query_buffer_bytes,
        conn.query_buffer_free_bytes,
        argv_mem,
        conn.output_bytes,
        conn.output_bytes,
        conn.output_bytes,
        conn.total_bytes,
        conn.events,
        cmd,
        session.resp
    )
}

fn current_line(ctx: &Ctx, argv: &[&[u8]], cmd: &str) -> String {
    let conn = ctx.host.connection().unwrap_or_else(|| Connection {
        events: "r",
        last_interaction_ms: ctx.now_ms,
        ..Connection::default()
    });
    let argv_mem = argv.iter().map(|a| a.len()).sum();
    let dirty = ctx.core.clients.is_dirty(ctx.session.id);
    // Inside EXEC the client's last command is EXEC itself.
    let cmd = if ctx.in_exec { "exec" } else { cmd };
    client_line(ctx.session, &conn, ctx.now_ms, Some((cmd, argv_mem)), dirty)
}

/// A client type CLIENT LIST/KILL TYPE names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Pubsub,
    /// `master`, `replica`/`slave`: hozon has no such clients.
    Replication,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, Reply> {
        if is(name, "normal") {
            Ok(ClientType::Normal)
        } else if is(name, "pubsub") {
            Ok(ClientType::Pubsub)
        } else if is(name, "slave") || is(name, "replica") || is(name, "master") {
            Ok(ClientType::Replication)
        } else {
            let mut msg = b"ERR Unknown client type '".to_vec();
            msg.extend_from_slice(name);
            msg.push(b'\'');
            Err(Reply::error(super::error_text(&msg)))
        }
    }

    /// Redis's getClientType: a subscribed client is `pubsub`.
    fn of(session: &Session) -> ClientType {
        if session.subscribed() {
            ClientType::Pubsub
        } else {
            ClientType::Normal
        }
    }
}

fn client_info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut line = current_line(ctx, argv, "client|info");
    line.push('\n');
    Ok(Reply::Verbatim(*b"txt", line.into_bytes()))
}

fn client_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut ids: Option<Vec<i64>> = None;
    let mut wanted: Option<ClientType> = None;
    if argv.len() == 4 && is(argv[2], "type") {
        wanted = Some(ClientType::parse(argv[3])?);
    } else if argv.len() > 3 && is(argv[2], "id") {
        let mut list = Vec::with_capacity(argv.len() - 3);
        for arg in &argv[3..] {
            list.push(
                crate::types::num::parse_i64(arg).ok_or(Reply::err("ERR Invalid client ID"))?,
            );
        }
        ids = Some(list);
    } else if argv.len() != 2 {
        return super::syntax_error();
    }
    let mut lines: Vec<(u64, String)> = Vec::new();
    let included = |session: &Session| wanted.is_none_or(|t| t == ClientType::of(session));
    if included(ctx.session) {
        lines.push((ctx.session.id, current_line(ctx, argv, "client|list")));
    }
    let now = ctx.now_ms;
    let clients = &ctx.core.clients;
    ctx.host.for_each_client(&mut |session, conn| {
        if included(session) {
            let dirty = clients.is_dirty(session.id);
            lines.push((session.id, client_line(session, conn, now, None, dirty)))
        }
    });
    lines.sort_by_key(|(id, _)| *id);
    let mut out = String::new();
    match ids {
        // With IDs, clients come in the order asked (repeats included).
        Some(ids) => {
            for id in ids {
                if let Some((_, line)) = lines.iter().find(|(cid, _)| *cid as i64 == id) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        None => {
            for (_, line) in &lines {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(Reply::Verbatim(*b"txt", out.into_bytes()))
}

/// CLIENT KILL's filters.
#[derive(Default)]
struct KillFilter {
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    id: Option<u64>,
    client_type: Option<ClientType>,
    skipme: bool,
}

impl KillFilter {
    fn matches(&self, session: &Session, conn: &Connection) -> bool {
        self.addr
            .as_deref()
            .is_none_or(|a| a == conn.addr.as_bytes())
            && self
                .laddr
                .as_deref()
                .is_none_or(|a| a == conn.laddr.as_bytes())
            && self.id.is_none_or(|id| id == session.id)
            && self
                .client_type
                .is_none_or(|t| t == ClientType::of(session))
    }
}

fn client_kill(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let old_form = argv.len() == 3;
    let mut filter = KillFilter {
        skipme: true,
        ..KillFilter::default()
    };
    if old_form {
        filter.addr = Some(argv[2].to_vec());
        // With the old form a client may kill itself.
        filter.skipme = false;
    } else {
        let mut i = 2;
        while i < argv.len() {
            let more = i + 1 < argv.len();
            let opt = argv[i];
            if is(opt, "id") && more {
                let id = crate::types::num::parse_i64(argv[i + 1])
                    .filter(|&id| id >= 1)
                    .ok_or(Reply::err("ERR client-id should be greater than 0"))?;
                filter.id = Some(id as u64);
            } else if is(opt, "type") && more {
                filter.client_type = Some(ClientType::parse(argv[i + 1])?);
            } else if is(opt, "addr") && more {
                filter.addr = Some(argv[i + 1].to_vec());
            } else if is(opt, "laddr") && more {
                filter.laddr = Some(argv[i + 1].to_vec());
            } else if is(opt, "user") && more {
                // `default` is the only user; every client is logged in as it.
                if argv[i + 1] != b"default" {
                    let mut msg = b"ERR No such user '".to_vec();
                    msg.extend_from_slice(argv[i + 1]);
                    msg.push(b'\'');
                    return Err(Reply::error(super::error_text(&msg)));
                }
            } else if is(opt, "skipme") && more {
                if is(argv[i + 1], "yes") {
                    filter.skipme = true;
                } else if is(argv[i + 1], "no") {
                    filter.skipme = false;
                } else {
                    return super::syntax_error();
                }
            } else {
                return super::syntax_error();
            }
            i += 2;
        }
    }
    let mut killed = ctx
        .host
        .kill_clients(&mut |session, conn| filter.matches(session, conn));
    if !filter.skipme {
        let conn = ctx.host.connection().unwrap_or_default();
        if filter.matches(ctx.session, &conn) {
            // Closed once this reply is written.
            ctx.session.close_after_reply = true;
            killed += 1;
        }
    }
    if old_form {
        if killed == 0 {
            Err(Reply::err("ERR No such client"))
        } else {
            Ok(Reply::ok())
        }
    } else {
        Ok(Reply::Int(killed as i64))
    }
}

// ---------------------------------------------------------------------------
// COMMAND

const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

fn command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 1 {
        return Ok(Reply::Array(
            sorted_commands(&ctx.core.config.command_renames)
                .map(|spec| command_info_reply(spec, None))
                .collect(),
        ));
    }
    let Some(sub) = COMMAND_SUBCOMMANDS.iter().find(|s| is(argv[1], s.name)) else {
        return Err(super::unknown_subcommand_error("command", argv[1]));
    };
    if !sub.arity_ok(argv.len()) {
        return Err(super::arity_error(&format!("command|{}", sub.name)));
    }
    (sub.handler)(ctx, argv)
}

/// The top-level commands clients can reach (rename-command may have
/// disabled some), by name (Redis's order is its hash table's, which
/// differs from run to run: any fixed order is as good).
fn sorted_commands(renames: &CommandRenames) -> impl Iterator<Item = &'static CommandSpec> {
    let mut all: Vec<&'static CommandSpec> = super::table()
        .values()
        .copied()
        .filter(|spec| renames.is_empty() || renames.reachable(spec.name))
        .collect();
    all.sort_by_key(|s| s.name);
    all.into_iter()
}

/// The top-level command a client reaches by `name`, rename-command
/// applied (Redis looks names up in its renamed table).
fn lookup_renamed(renames: &CommandRenames, name: &[u8]) -> Option<&'static CommandSpec> {
    match renames.resolve(name) {
        CommandName::Unchanged => super::lookup(name),
        CommandName::Renamed(real) => super::lookup(real.as_bytes()),
        CommandName::Removed => None,
    }
}

/// A command or subcommand by full name (`get`, `config|get`), as Redis's
/// `lookupCommandBySds` finds it (under its rename-command name, if
/// any). Returns the spec and its parent's name.
fn lookup_full_name(
    renames: &CommandRenames,
    name: &[u8],
) -> Option<(&'static CommandSpec, Option<&'static str>)> {
    let mut parts = name.split(|&b| b == b'|');
    let first = parts.next()?;
    let base = lookup_renamed(renames, first)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some((base, None)),
        (Some(sub), None) => {
            let spec = subcommands_of(base)
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))?;
            Some((spec, Some(base.name)))
        }
        _ => None,
    }
}

fn full_name(spec: &CommandSpec, parent: Option<&str>) -> String {
    match parent {
        Some(p) => format!("{p}|{}", spec.name),
        None => spec.name.to_string(),
    }
}

/// COMMAND INFO's flags, in Redis's order.
fn command_flags_reply(spec: &CommandSpec, doc: Option<&Doc>) -> Reply {
    let extra = doc.map_or(0, |d| d.extra_flags);
    let names: [(bool, &'static str); 19] = [
        (spec.has(WRITE), "write"),
        (spec.has(READONLY), "readonly"),
        (spec.has(DENYOOM), "denyoom"),
        (spec.has(ADMIN), "admin"),
        (spec.has(PUBSUB), "pubsub"),
        (spec.has(NOSCRIPT), "noscript"),
        (spec.has(BLOCKING), "blocking"),
        (spec.has(LOADING), "loading"),
        (spec.has(STALE), "stale"),
        (spec.has(SKIP_MONITOR), "skip_monitor"),
        (spec.has(SKIP_SLOWLOG), "skip_slowlog"),
        (spec.has(FAST), "fast"),
        (spec.has(NO_AUTH), "no_auth"),
        (
            extra & docs::EXTRA_NO_MANDATORY_KEYS != 0,
            "no_mandatory_keys",
        ),
        (
            extra & docs::EXTRA_NO_ASYNC_LOADING != 0,
            "no_async_loading",
        ),
        (spec.has(NO_MULTI), "no_multi"),
        (spec.has(MOVABLE_KEYS), "movablekeys"),
        (spec.has(ALLOW_BUSY), "allow_busy"),
        (false, "module"),
    ];
    Reply::Set(
        names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| Reply::simple(n))
            .collect(),
    )
}

/// ACL categories: the documented ones plus those implied by the flags
/// (Redis's `setImplicitACLCategories`).
fn acl_categories(spec: &CommandSpec, doc: Option<&Doc>) -> u32 {
    let bit = |name: &str| {
        1u32 << docs::ACL_NAMES
            .iter()
            .position(|n| *n == name)
            .expect("known ACL category")
    };
    let mut acl = doc.map_or(0, |d| d.acl);
    if spec.has(WRITE) {
        acl |= bit("write");
    }
    if spec.has(READONLY) && acl & bit("scripting") == 0 {
        acl |= bit("read");
    }
    if spec.has(ADMIN) {
        acl |= bit("admin") | bit("dangerous");
    }
    if spec.has(PUBSUB) {
        acl |= bit("pubsub");
    }
    if spec.has(FAST) {
        acl |= bit("fast");
    }
    if spec.has(BLOCKING) {
        acl |= bit("blocking");
    }
    if acl & bit("fast") == 0 {
        acl |= bit("slow");
    }
    acl
}

fn bulk_str(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn key_flags_reply(flags: u16) -> Reply {
    Reply::Set(
        docs::KEY_FLAG_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| flags & (1 << i) != 0)
            .map(|(_, n)| Reply::simple(n))
            .collect(),
    )
}

fn key_specs_reply(doc: Option<&Doc>) -> Reply {
    let specs = doc.map_or(&[][..], |d| d.key_specs);
    Reply::Set(
        specs
            .iter()
            .map(|ks| {
                let mut map = Vec::with_capacity(4);
                if !ks.notes.is_empty() {
                    map.push((bulk_str("notes"), bulk_str(ks.notes)));
                }
                map.push((bulk_str("flags"), key_flags_reply(ks.flags)));
                let begin = match ks.begin {
                    BeginSearch::Unknown => ("unknown", Vec::new()),
                    BeginSearch::Index(pos) => (
                        "index",
                        vec![(bulk_str("index"), Reply::Int(i64::from(pos)))],
                    ),
                    BeginSearch::Keyword(word, from) => (
                        "keyword",
                        vec![
                            (bulk_str("keyword"), bulk_str(word)),
                            (bulk_str("startfrom"), Reply::Int(i64::from(from))),
                        ],
                    ),
                };
                map.push((
                    bulk_str("begin_search"),
                    Reply::Map(vec![
                        (bulk_str("type"), bulk_str(begin.0)),
                        (bulk_str("spec"), Reply::Map(begin.1)),
                    ]),
                ));
                let find = match ks.find {
                    FindKeys::Unknown => ("unknown", Vec::new()),
                    FindKeys::Range {
                        lastkey,
                        keystep,
                        limit,
                    } => (
                        "range",
                        vec![
                            (bulk_str("lastkey"), Reply::Int(i64::from(lastkey))),
                            (bulk_str("keystep"), Reply::Int(i64::from(keystep))),
                            (bulk_str("limit"), Reply::Int(i64::from(limit))),
                        ],
                    ),
                    FindKeys::Keynum {
                        keynumidx,
                        firstkey,
                        keystep,
                    } => (
                        "keynum",
                        vec![
                            (bulk_str("keynumidx"), Reply::Int(i64::from(keynumidx))),
                            (bulk_str("firstkey"), Reply::Int(i64::from(firstkey))),
                            (bulk_str("keystep"), Reply::Int(i64::from(keystep))),
                        ],
                    ),
                };
                map.push((
                    bulk_str("find_keys"),
                    Reply::Map(vec![
                        (bulk_str("type"), bulk_str(find.0)),
                        (bulk_str("spec"), Reply::Map(find.1)),
                    ]),
                ));
                Reply::Map(map)
            })
            .collect(),
    )
}

/// One command's COMMAND INFO entry (Redis's `addReplyCommandInfo`).
fn command_info_reply(spec: &CommandSpec, parent: Option<&str>) -> Reply {
    let name = full_name(spec, parent);
    let doc = docs::lookup(&name);
    let acl = acl_categories(spec, doc);
    let categories = docs::ACL_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| acl & (1 << i) != 0)
        .map(|(_, n)| Reply::Simple(format!("@{n}").into()))
        .collect();
    let tips = doc
        .map_or(&[][..], |d| d.tips)
        .iter()
        .map(|t| bulk_str(t))
        .collect();
    let subs = subcommands_of(spec);
    let subcommands = if subs.is_empty() {
        Reply::Set(Vec::new())
    } else {
        Reply::Array(
            subs.iter()
                .map(|s| command_info_reply(s, Some(spec.name)))
                .collect(),
        )
    };
    Reply::Array(vec![
        Reply::Bulk(name.into_bytes()),
        Reply::Int(i64::from(spec.arity)),
        command_flags_reply(spec, doc),
        Reply::Int(i64::from(spec.first_key)),
        Reply::Int(i64::from(spec.last_key)),
        Reply::Int(i64::from(spec.key_step)),
        Reply::Set(categories),
        Reply::Set(tips),
        key_specs_reply(doc),
        subcommands,
    ])
}

fn args_reply(args: &[docs::Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut map = vec![
                    (bulk_str("name"), bulk_str(a.name)),
                    (bulk_str("type"), bulk_str(a.kind)),
                ];
                if a.key_spec_index >= 0 {
                    map.push((
                        bulk_str("key_spec_index"),
                        Reply::Int(i64::from(a.key_spec_index)),
                    ));
                }
                if !a.token.is_empty() {
                    map.push((bulk_str("token"), bulk_str(a.token)));
                }
                if !a.since.is_empty() {
                    map.push((bulk_str("since"), bulk_str(a.since)));
                }
                if !a.deprecated_since.is_empty() {
                    map.push((bulk_str("deprecated_since"), bulk_str(a.deprecated_since)));
                }
                if a.flags != 0 {
                    let flags = docs::ARG_FLAG_NAMES
                        .iter()
                        .filter(|(bit, _)| a.flags & bit != 0)
                        .map(|(_, n)| Reply::simple(n))
                        .collect();
                    map.push((bulk_str("flags"), Reply::Set(flags)));
                }
                if a.kind == "oneof" || a.kind == "block" {
                    map.push((bulk_str("arguments"), args_reply(a.args)));
                }
                Reply::Map(map)
            })
            .collect(),
    )
}

/// One command's COMMAND DOCS entry (Redis's `addReplyCommandDocs`).
fn command_docs_reply(spec: &CommandSpec, parent: Option<&str>) -> Reply {
    let name = full_name(spec, parent);
    let mut map = Vec::new();
    let group = match docs::lookup(&name) {
        Some(doc) => {
            if !doc.summary.is_empty() {
                map.push((bulk_str("summary"), bulk_str(doc.summary)));
            }
            if !doc.since.is_empty() {
                map.push((bulk_str("since"), bulk_str(doc.since)));
            }
            map.push((bulk_str("group"), bulk_str(doc.group)));
            if !doc.complexity.is_empty() {
                map.push((bulk_str("complexity"), bulk_str(doc.complexity)));
            }
            if doc.doc_flags != 0 {
                let mut flags = Vec::new();
                if doc.doc_flags & docs::DOC_DEPRECATED != 0 {
                    flags.push(Reply::simple("deprecated"));
                }
                if doc.doc_flags & docs::DOC_SYSCMD != 0 {
                    flags.push(Reply::simple("syscmd"));
                }
                map.push((bulk_str("doc_flags"), Reply::Set(flags)));
            }
            if !doc.deprecated_since.is_empty() {
                map.push((bulk_str("deprecated_since"), bulk_str(doc.deprecated_since)));
            }
            if !doc.replaced_by.is_empty() {
                map.push((bulk_str("replaced_by"), bulk_str(doc.replaced_by)));
            }
            if !doc.history.is_empty() {
                let history = doc
                    .history
                    .iter()
                    .map(|(v, what)| Reply::Array(vec![bulk_str(v), bulk_str(what)]))
                    .collect();
                map.push((bulk_str("history"), Reply::Set(history)));
            }
            if !doc.args.is_empty() {
                map.push((bulk_str("arguments"), args_reply(doc.args)));
            }
            None
        }
        None => Some(spec.group),
    };
    if let Some(group) = group {
        map.push((bulk_str("group"), bulk_str(group)));
    }
    let subs = subcommands_of(spec);
    if !subs.is_empty() {
        let entries = subs
            .iter()
            .map(|s| {
                (
                    Reply::Bulk(full_name(s, Some(spec.name)).into_bytes()),
                    command_docs_reply(s, Some(spec.name)),
                )
            })
            .collect();
        map.push((bulk_str("subcommands"), Reply::Map(entries)));
    }
    Reply::Map(map)
}

fn command_count(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        sorted_commands(&ctx.core.config.command_renames).count() as i64,
    ))
}

fn command_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, COMMAND_HELP))
}

fn command_info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let renames = &ctx.core.config.command_renames;
    if argv.len() == 2 {
        return Ok(Reply::Array(
            sorted_commands(renames)
                .map(|spec| command_info_reply(spec, None))
                .collect(),
        ));
    }
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|name| match lookup_full_name(renames, name) {
                Some((spec, parent)) => command_info_reply(spec, parent),
                None => Reply::Null,
            })
            .collect(),
    ))
}

fn command_docs(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let renames = &ctx.core.config.command_renames;
    let entries: Vec<(Reply, Reply)> = if argv.len() == 2 {
        sorted_commands(renames)
            .map(|spec| (bulk_str(spec.name), command_docs_reply(spec, None)))
            .collect()
    } else {
        argv[2..]
            .iter()
            .filter_map(|name| lookup_full_name(renames, name))
            .map(|(spec, parent)| {
                (
                    Reply::Bulk(full_name(spec, parent).into_bytes()),
                    command_docs_reply(spec, parent),
                )
            })
            .collect()
    };
    Ok(Reply::Map(entries))
}

fn command_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    enum Filter<'a> {
        All,
        Module,
        AclCat(Option<usize>),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::All;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(argv[i], "filterby") && more == 2 {
            let arg = argv[i + 2];
            filter = if is(argv[i + 1], "module") {
                Filter::Module
            } else if is(argv[i + 1], "aclcat") {
                Filter::AclCat(
                    docs::ACL_NAMES
                        .iter()
                        .position(|n| n.as_bytes().eq_ignore_ascii_case(arg)),
                )
            } else if is(argv[i + 1], "pattern") {
                Filter::Pattern(arg)
            } else {
                return super::syntax_error();
            };
            i += 3;
        } else {
            return super::syntax_error();
        }
    }
    let mut names = Vec::new();
    let mut consider = |spec: &CommandSpec, parent: Option<&str>| {
        let name = full_name(spec, parent);
        let keep = match &filter {
            Filter::All => true,
            Filter::Module => false,
            Filter::AclCat(None) => false,
            Filter::AclCat(Some(cat)) => {
                acl_categories(spec, docs::lookup(&name)) & (1 << cat) != 0
            }
            Filter::Pattern(p) => crate::glob::matches(p, name.as_bytes(), true),
        };
        if keep {
            names.push(Reply::Bulk(name.into_bytes()));
        }
    };
    for spec in sorted_commands(&ctx.core.config.command_renames) {
        consider(spec, None);
        for sub in subcommands_of(spec) {
            consider(sub, Some(spec.name));
        }
    }
    Ok(Reply::Array(names))
}

/// Finds the keys of a full command through its key specs (Redis's
/// `getKeysUsingKeySpecs`). Returns (argument index, key flags) pairs, or
/// `None` when a spec does not fit the arguments.
fn keys_from_specs(doc: &Doc, argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in doc.key_specs {
        if spec.flags & docs::KEY_NOT_KEY != 0 {
            continue;
        }
        let mut first: i64 = match spec.begin {
            BeginSearch::Index(pos) => i64::from(pos),
            BeginSearch::Keyword(word, startfrom) => {
                let startfrom = i64::from(startfrom);
                let start = if startfrom > 0 {
                    startfrom
                } else {
                    argc + startfrom
                };
                let end = if startfrom > 0 { argc - 1 } else { 1 };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if is(argv[i as usize], word) {
                        found = i + 1;
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            BeginSearch::Unknown => return None,
        };
        let (last, step) = match spec.find {
            FindKeys::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let lastkey = i64::from(lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(limit) + lastkey)
                };
                (last, i64::from(keystep))
            }
            FindKeys::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let idx = first + i64::from(keynumidx);
                if i64::from(keynumidx) >= argc || idx >= argc {
                    return None;
                }
                let numkeys =
                    crate::types::num::parse_i64(argv[idx as usize]).filter(|&n| n >= 0)?;
                let first_key = first + i64::from(firstkey);
                // Keys are counted from `first_key`; the bounds checks
                // below use it as the start.
                first = first_key;
                (first_key + numkeys - 1, i64::from(keystep))
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        keys_range(&mut keys, first, last, step, argc, spec.flags);
        if spec.flags & docs::KEY_INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

fn keys_range(
    keys: &mut Vec<(usize, u16)>,
    first: i64,
    last: i64,
    step: i64,
    argc: i64,
    flags: u16,
) {
    let mut i = first;
    while i <= last && step > 0 {
        if i >= 0 && i < argc {
            keys.push((i as usize, flags));
        }
        i += step;
    }
}

fn getkeys(renames: &CommandRenames, argv: &[&[u8]], with_flags: bool) -> CmdResult {
    let cmd_argv = &argv[2..];
    let base = lookup_renamed(renames, cmd_argv[0]);
    let found = base.and_then(|base| {
        let subs = subcommands_of(base);
        if subs.is_empty() || cmd_argv.len() < 2 {
            Some((base, None))
        } else {
            subs.iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(cmd_argv[1]))
                .map(|s| (s, Some(base.name)))
        }
    });
    let Some((spec, parent)) = found else {
        return Err(Reply::err("ERR Invalid command specified"));
    };
    let doc = docs::lookup(&full_name(spec, parent));
    let has_keys = doc.is_some_and(|d| {
        d.getkeys_proc || d.key_specs.iter().any(|k| k.flags & docs::KEY_NOT_KEY == 0)
    });
    let Some(doc) = doc.filter(|_| has_keys) else {
        return Err(Reply::err("ERR The command has no key arguments"));
    };
    if !spec.arity_ok(cmd_argv.len()) {
        return Err(Reply::err(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let mut keys = keys_from_specs(doc, cmd_argv).unwrap_or_default();
    if doc
        .key_specs
        .iter()
        .any(|k| k.flags & docs::KEY_VARIABLE_FLAGS != 0)
    {
        // Redis asks the command's own key finder, whose flags depend on
        // the arguments.
        if let (Some(flags), Some(first)) =
            (variable_key_flags(doc.name, cmd_argv), keys.first_mut())
        {
            first.1 = flags;
        }
    }
    if keys.is_empty() {
        if doc.extra_flags & docs::EXTRA_NO_MANDATORY_KEYS != 0 {
            return Ok(Reply::Array(Vec::new()));
        }
        return Err(Reply::err("ERR Invalid arguments specified for command"));
    }
    Ok(Reply::Array(
        keys.iter()
            .map(|&(pos, flags)| {
                let key = Reply::bulk(cmd_argv[pos]);
                if with_flags {
                    Reply::Array(vec![key, key_flags_reply(flags)])
                } else {
                    key
                }
            })
            .collect(),
    ))
}

/// The key flags of commands whose key spec says `variable_flags`, as
/// Redis's `setGetKeys` and `bitfieldGetKeys` compute them.
fn variable_key_flags(name: &str, argv: &[&[u8]]) -> Option<u16> {
    let bit = |n: &str| {
        1u16 << docs::KEY_FLAG_NAMES
            .iter()
            .position(|f| *f == n)
            .expect("known key flag")
    };
    match name {
        "set" => Some(if argv.iter().skip(3).any(|a| is(a, "get")) {
            bit("RW") | bit("access") | bit("update")
        } else {
            bit("OW") | bit("update")
        }),
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < argv.len() {
                let remaining = argv.len() - i - 1;
                if is(argv[i], "get") && remaining >= 2 {
                    i += 3;
                } else if (is(argv[i], "set") || is(argv[i], "incrby")) && remaining >= 3 {
                    readonly = false;
                    break;
                } else if is(argv[i], "overflow") && remaining >= 1 {
                    i += 2;
                } else {
                    readonly = false;
                    break;
                }
            }
            Some(if readonly {
                bit("RO") | bit("access")
            } else {
                bit("RW") | bit("access") | bit("update")
            })
        }
        _ => None,
    }
}

fn command_getkeys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    getkeys(&ctx.core.config.command_renames, argv, false)
}

fn command_getkeysandflags(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    getkeys(&ctx.core.config.command_renames, argv, true)
}

// ---------------------------------------------------------------------------
// INFO

/// The sections `INFO` (no argument) and `INFO default` report.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "module_list",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Redis's `bytesToHuman`.
fn bytes_to_human(n: u64) -> String {
    const K: f64 = 1024.0;
    let d = n as f64;
    if n < 1024 {
        format!("{n}B")
    } else if n < 1024 * 1024 {
        format!("{:.2}K", d / K)
    } else if n < 1024 * 1024 * 1024 {
        format!("{:.2}M", d / (K * K))
    } else if n < 1024u64.pow(4) {
        format!("{:.2}G", d / K.powi(3))
    } else if n < 1024u64.pow(5) {
        format!("{:.2}T", d / K.powi(4))
    } else if n < 1024u64.pow(6) {
        format!("{:.2}P", d / K.powi(5))
    } else {
        format!("{n}B")
    }
}

/// A random 40-hex-digit id fixed for the life of the process (Redis's
/// `run_id` and replication id).
fn process_hex_id(which: usize) -> &'static str {
    static IDS: OnceLock<[String; 2]> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let mut rng = crate::rand::Rng::new();
        let mut make = || {
            let mut s = String::with_capacity(40);
            while s.len() < 40 {
                s.push_str(&format!("{:016x}", rng.next_u64()));
            }
            s.truncate(40);
            s
        };
        [make(), make()]
    });
    &ids[which]
}

/// A `/proc` file's text ("" where there is no `/proc`).
fn proc_text(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A `Name:   123 kB` field of a `/proc` status-style file, in bytes.
fn proc_kb_field(text: &str, field: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resident set size of the process, from `/proc/self/status`.
fn process_rss() -> u64 {
    proc_kb_field(&proc_text("/proc/self/status"), "VmRSS:")
}

/// (system, user) CPU seconds of a `/proc/.../stat` file, formatted as
/// Redis prints `getrusage` times. The kernel reports clock ticks, which
/// are 1/100 s on Linux (`USER_HZ`).
fn cpu_times(path: &str) -> (String, String) {
    let text = proc_text(path);
    // The command name in field 2 may contain spaces: fields are counted
    // after its closing parenthesis.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15; after the name, indexes 11, 12.
    let show = |t: u64| format!("{}.{:06}", t / 100, (t % 100) * 10_000);
    (show(ticks(12)), show(ticks(11)))
}

fn info_server(ctx: &Ctx, out: &mut String) {
    let now_us = now_us();
    let uptime_s = ((now_us / 1000 - ctx.core.start_ms) / 1000).max(0);
    let config = &ctx.core.config;
    let os_type = proc_text("/proc/sys/kernel/ostype");
    let os_release = proc_text("/proc/sys/kernel/osrelease");
    let os = if os_type.is_empty() {
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
    } else {
        format!(
            "{} {} {}",
            os_type.trim(),
            os_release.trim(),
            std::env::consts::ARCH
        )
    };
    let executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let config_file = config
        .config_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let multiplexing = if cfg!(target_os = "linux") {
        "epoll"
    } else {
        "kqueue"
    };
    let lines = [
        format!("redis_version:{REDIS_VERSION}"),
        "redis_git_sha1:00000000".to_string(),
        "redis_git_dirty:0".to_string(),
        "redis_build_id:0".to_string(),
        "redis_mode:standalone".to_string(),
        format!("os:{os}"),
        format!("arch_bits:{}", usize::BITS),
        "monotonic_clock:POSIX clock_gettime".to_string(),
        format!("multiplexing_api:{multiplexing}"),
        "atomicvar_api:c11-builtin".to_string(),
        "gcc_version:0.0.0".to_string(),
        format!("process_id:{}", std::process::id()),
        "process_supervised:no".to_string(),
        format!("run_id:{}", process_hex_id(0)),
        format!("tcp_port:{}", config.port),
        format!("server_time_usec:{now_us}"),
        format!("uptime_in_seconds:{uptime_s}"),
        format!("uptime_in_days:{}", uptime_s / 86_400),
        format!("hz:{}", config.hz),
        format!("configured_hz:{}", config.hz),
        format!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1)),
        format!("executable:{executable}"),
        format!("config_file:{config_file}"),
        "io_threads_active:0".to_string(),
        format!("hozon_version:{}", env!("CARGO_PKG_VERSION")),
    ];
    section(out, "Server", &lines);
}

fn info_clients(ctx: &Ctx, out: &mut String) {
    let mut max_in = ctx.host.connection().map_or(0, |c| c.query_buffer_bytes);
    let mut max_out = 0;
    ctx.host.for_each_client(&mut |_, conn| {
        max_in = max_in.max(conn.query_buffer_bytes);
        max_out = max_out.max(conn.output_bytes);
    });
    let lines = [
        format!("connected_clients:{}", ctx.host.connected_clients()),
        "cluster_connections:0".to_string(),
        format!("maxclients:{}", ctx.core.config.maxclients),
        format!("client_recent_max_input_buffer:{max_in}"),
        format!("client_recent_max_output_buffer:{max_out}"),
        format!("blocked_clients:{}", ctx.core.clients.blocked_count()),
        "tracking_clients:0".to_string(),
        format!(
            "clients_in_timeout_table:{}",
            ctx.core.clients.timeout_count()
        ),
    ];
    section(out, "Clients", &lines);
}

/// Memory figures. `used_memory` is what the server's counting allocator
/// reports (every allocation of the process, like Redis's zmalloc
/// counter); an embedded engine without one reports the resident set size.
fn info_memory(ctx: &Ctx, out: &mut String) {
    let rss = process_rss();
    let (used, peak, startup) = match ctx.host.used_memory() {
        Some(m) => (m.used, m.peak.max(m.used), m.startup.min(m.used)),
        None => (rss, rss, 0),
    };
    let mut clients_mem = ctx.host.connection().map_or(0, |c| c.total_bytes as u64);
    ctx.host
        .for_each_client(&mut |_, conn| clients_mem += conn.total_bytes as u64);
    let overhead = (startup + clients_mem).min(used);
    let dataset = used - overhead;
    let net = used.saturating_sub(startup);
    let perc = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let total_system = proc_kb_field(&proc_text("/proc/meminfo"), "MemTotal:");
    // A script calling INFO runs while the Lua state is out of Core: it
    // reports none then.
    let (lua, scripts, cached) = super::scripting::state(ctx.core).map_or((0, 0, 0), |s| {
        (s.lua_bytes() as u64, s.scripts_bytes() as u64, s.cached())
    });
    let config = &ctx.core.config;
    let policy = config::MAXMEMORY_POLICIES
        .get(config.maxmemory_policy)
        .copied()
        .unwrap_or("noeviction");
    let lines = [
        format!("used_memory:{used}"),
        format!("used_memory_human:{}", bytes_to_human(used)),
        format!("used_memory_rss:{rss}"),
        format!("used_memory_rss_human:{}", bytes_to_human(rss)),
        format!("used_memory_peak:{peak}"),
        format!("used_memory_peak_human:{}", bytes_to_human(peak)),
        format!("used_memory_peak_perc:{:.2}%", perc(used, peak)),
        format!("used_memory_overhead:{overhead}"),
        format!("used_memory_startup:{startup}"),
        format!("used_memory_dataset:{dataset}"),
        format!("used_memory_dataset_perc:{:.2}%", perc(dataset, net)),
        format!("allocator_allocated:{used}"),
        format!("allocator_active:{used}"),
        format!("allocator_resident:{rss}"),
        format!("total_system_memory:{total_system}"),
        format!("total_system_memory_human:{}", bytes_to_human(total_system)),
        format!("used_memory_lua:{lua}"),
        format!("used_memory_vm_eval:{lua}"),
        format!("used_memory_lua_human:{}", bytes_to_human(lua)),
        format!("used_memory_scripts_eval:{scripts}"),
        format!("number_of_cached_scripts:{cached}"),
        "number_of_functions:0".to_string(),
        "number_of_libraries:0".to_string(),
        "used_memory_vm_functions:0".to_string(),
        format!("used_memory_vm_total:{lua}"),
        format!("used_memory_vm_total_human:{}", bytes_to_human(lua)),
        "used_memory_functions:0".to_string(),
        format!("used_memory_scripts:{scripts}"),
        format!("used_memory_scripts_human:{}", bytes_to_human(scripts)),
        format!("maxmemory:{}", config.maxmemory),
        format!("maxmemory_human:{}", bytes_to_human(config.maxmemory)),
        format!("maxmemory_policy:{policy}"),
        "allocator_frag_ratio:1.00".to_string(),
        "allocator_frag_bytes:0".to_string(),
        format!("allocator_rss_ratio:{:.2}", ratio(rss, used)),
        format!("allocator_rss_bytes:{}", rss as i64 - used as i64),
        "rss_overhead_ratio:1.00".to_string(),
        "rss_overhead_bytes:0".to_string(),
        format!("mem_fragmentation_ratio:{:.2}", ratio(rss, used)),
        format!("mem_fragmentation_bytes:{}", rss as i64 - used as i64),
        "mem_not_counted_for_evict:0".to_string(),
        "mem_replication_backlog:0".to_string(),
        "mem_total_replication_buffers:0".to_string(),
        "mem_clients_slaves:0".to_string(),
        format!("mem_clients_normal:{clients_mem}"),
        "mem_cluster_links:0".to_string(),
        "mem_aof_buffer:0".to_string(),
        "mem_allocator:libc".to_string(),
        "active_defrag_running:0".to_string(),
        "lazyfree_pending_objects:0".to_string(),
        "lazyfreed_objects:0".to_string(),
    ];
    section(out, "Memory", &lines);
}

fn info_persistence(ctx: &Ctx, out: &mut String) {
    // The append-only file and the snapshot are loaded before the server
    // listens, so no client sees `loading:1`.
    let aof = ctx.core.aof_status();
    let save = &ctx.core.save;
    let rewrite = &ctx.core.rewrite;
    let job = save.job.as_ref();
    let write_ok = aof
        .as_ref()
        .is_none_or(|a| a.write_error.is_none() && a.poisoned.is_none());
    let mut lines = vec![
        "loading:0".to_string(),
        "async_loading:0".to_string(),
        "current_cow_peak:0".to_string(),
        "current_cow_size:0".to_string(),
        "current_cow_size_age:0".to_string(),
        "current_fork_perc:0.00".to_string(),
        format!(
            "current_save_keys_processed:{}",
            job.map_or(0, |j| j.keys_processed)
        ),
        format!(
            "current_save_keys_total:{}",
            job.map_or(0, |j| j.keys_total)
        ),
        format!("rdb_changes_since_last_save:{}", ctx.core.dirty),
        format!("rdb_bgsave_in_progress:{}", u8::from(job.is_some())),
        format!("rdb_last_save_time:{}", save.last_save_ms / 1000),
        format!(
            "rdb_last_bgsave_status:{}",
            if save.last_bgsave_ok { "ok" } else { "err" }
        ),
        format!("rdb_last_bgsave_time_sec:{}", save.last_bgsave_secs),
        format!(
            "rdb_current_bgsave_time_sec:{}",
            job.map_or(-1, |j| (ctx.now_ms - j.started_ms) / 1000)
        ),
        format!("rdb_saves:{}", save.saves),
        "rdb_last_cow_size:0".to_string(),
        format!("rdb_last_load_keys_expired:{}", save.last_load_expired),
        format!("rdb_last_load_keys_loaded:{}", save.last_load_keys),
        format!("aof_enabled:{}", u8::from(aof.is_some())),
        format!(
            "aof_rewrite_in_progress:{}",
            u8::from(rewrite.in_progress())
        ),
        format!("aof_rewrite_scheduled:{}", u8::from(rewrite.scheduled)),
        format!("aof_last_rewrite_time_sec:{}", rewrite.last_secs),
        format!(
            "aof_current_rewrite_time_sec:{}",
            rewrite
                .job
                .as_ref()
                .map_or(-1, |j| (ctx.now_ms - j.started_ms) / 1000)
        ),
        format!(
            "aof_last_bgrewrite_status:{}",
            if rewrite.last_ok { "ok" } else { "err" }
        ),
        format!("aof_rewrites:{}", rewrite.rewrites),
        format!(
            "aof_rewrites_consecutive_failures:{}",
            rewrite.consecutive_failures
        ),
        format!(
            "aof_last_write_status:{}",
            if write_ok { "ok" } else { "err" }
        ),
        "aof_last_cow_size:0".to_string(),
        "module_fork_in_progress:0".to_string(),
        "module_fork_last_cow_size:0".to_string(),
    ];
    if let Some(aof) = aof {
        lines.extend([
            format!("aof_current_size:{}", aof.current_size),
            format!("aof_base_size:{}", aof.base_size),
            format!("aof_pending_rewrite:{}", u8::from(rewrite.scheduled)),
            "aof_buffer_length:0".to_string(),
            format!("aof_rewrite_buffer_length:{}", rewrite.diff_pending()),
            format!("aof_pending_bio_fsync:{}", u8::from(aof.pending_bio_fsync)),
            format!("aof_delayed_fsync:{}", aof.delayed_fsync),
        ]);
    }
    section(out, "Persistence", &lines);
}

fn info_stats(ctx: &Ctx, out: &mut String) {
    let s = &ctx.core.stats;
    let lines = [
        format!("total_connections_received:{}", s.connections_received),
        format!("total_commands_processed:{}", s.commands_processed),
        "instantaneous_ops_per_sec:0".to_string(),
        format!("total_net_input_bytes:{}", s.net_input_bytes),
        format!("total_net_output_bytes:{}", s.net_output_bytes),
        "total_net_repl_input_bytes:0".to_string(),
        "total_net_repl_output_bytes:0".to_string(),
        "instantaneous_input_kbps:0.00".to_string(),
        "instantaneous_output_kbps:0.00".to_string(),
        "instantaneous_input_repl_kbps:0.00".to_string(),
        "instantaneous_output_repl_kbps:0.00".to_string(),
        format!("rejected_connections:{}", s.rejected_connections),
        "sync_full:0".to_string(),
        "sync_partial_ok:0".to_string(),
        "sync_partial_err:0".to_string(),
        format!("expired_keys:{}", s.expired_keys),
        "expired_stale_perc:0.00".to_string(),
        "expired_time_cap_reached_count:0".to_string(),
        "expire_cycle_cpu_milliseconds:0".to_string(),
        "evicted_keys:0".to_string(),
        "evicted_clients:0".to_string(),
        "total_eviction_exceeded_time:0".to_string(),
        "current_eviction_exceeded_time:0".to_string(),
        format!("keyspace_hits:{}", s.keyspace_hits),
        format!("keyspace_misses:{}", s.keyspace_misses),
        format!("pubsub_channels:{}", ctx.core.clients.channel_count(false)),
        format!("pubsub_patterns:{}", ctx.core.clients.pattern_count()),
        format!(
            "pubsubshard_channels:{}",
            ctx.core.clients.channel_count(true)
        ),
        "latest_fork_usec:0".to_string(),
        "total_forks:0".to_string(),
        "migrate_cached_sockets:0".to_string(),
        "slave_expires_tracked_keys:0".to_string(),
        "active_defrag_hits:0".to_string(),
        "active_defrag_misses:0".to_string(),
        "active_defrag_key_hits:0".to_string(),
        "active_defrag_key_misses:0".to_string(),
        "total_active_defrag_time:0".to_string(),
        "current_active_defrag_time:0".to_string(),
        "tracking_total_keys:0".to_string(),
        "tracking_total_items:0".to_string(),
        "tracking_total_prefixes:0".to_string(),
        "unexpected_error_replies:0".to_string(),
        "total_error_replies:0".to_string(),
        "dump_payload_sanitizations:0".to_string(),
        format!("total_reads_processed:{}", s.reads_processed),
        format!("total_writes_processed:{}", s.writes_processed),
        "io_threaded_reads_processed:0".to_string(),
        "io_threaded_writes_processed:0".to_string(),
        "reply_buffer_shrinks:0".to_string(),
        "reply_buffer_expands:0".to_string(),
    ];
    section(out, "Stats", &lines);
}

fn info_replication(out: &mut String) {
    let lines = [
        "role:master".to_string(),
        "connected_slaves:0".to_string(),
        "master_failover_state:no-failover".to_string(),
        format!("master_replid:{}", process_hex_id(1)),
        "master_replid2:0000000000000000000000000000000000000000".to_string(),
        "master_repl_offset:0".to_string(),
        "second_repl_offset:-1".to_string(),
        "repl_backlog_active:0".to_string(),
        "repl_backlog_size:1048576".to_string(),
        "repl_backlog_first_byte_offset:0".to_string(),
        "repl_backlog_histlen:0".to_string(),
    ];
    section(out, "Replication", &lines);
}

fn info_cpu(out: &mut String) {
    let (sys, user) = cpu_times("/proc/self/stat");
    let (main_sys, main_user) = cpu_times("/proc/thread-self/stat");
    let lines = [
        format!("used_cpu_sys:{sys}"),
        format!("used_cpu_user:{user}"),
        "used_cpu_sys_children:0.000000".to_string(),
        "used_cpu_user_children:0.000000".to_string(),
        format!("used_cpu_sys_main_thread:{main_sys}"),
        format!("used_cpu_user_main_thread:{main_user}"),
    ];
    section(out, "CPU", &lines);
}

/// Average remaining TTL of a database's keys, estimated from a bounded
/// sample of keys with a TTL (Redis keeps a running estimate maintained by
/// active expiry; a sample keeps INFO cheap on a large keyspace).
fn avg_ttl_ms(ctx: &Ctx, db: usize) -> i64 {
    const SAMPLE_KEYS: usize = 1024;
    const VISIT_LIMIT: usize = 16 * 1024;
    let database = ctx.core.keyspace.db(db);
    if database.expires_len() == 0 {
        return 0;
    }
    let (mut sum, mut count) = (0i64, 0i64);
    for (key, _) in database.iter().take(VISIT_LIMIT) {
        if let Some(at) = database.expire_at(key) {
            sum += (at - ctx.now_ms).max(0);
            count += 1;
            if count as usize >= SAMPLE_KEYS {
                break;
            }
        }
    }
    if count == 0 {
        0
    } else {
        sum / count
    }
}

fn info_keyspace(ctx: &Ctx, out: &mut String) {
    let mut lines = Vec::new();
    for db in 0..ctx.core.keyspace.db_count() {
        let database = ctx.core.keyspace.db(db);
        let (keys, expires) = (database.len(), database.expires_len());
        if keys > 0 || expires > 0 {
            lines.push(format!(
                "db{db}:keys={keys},expires={expires},avg_ttl={}",
                avg_ttl_ms(ctx, db)
            ));
        }
    }
    section(out, "Keyspace", &lines);
}

fn section(out: &mut String, title: &str, lines: &[String]) {
    if !out.is_empty() {
        out.push_str("\r\n");
    }
    out.push_str("# ");
    out.push_str(title);
    out.push_str("\r\n");
    for line in lines {
        out.push_str(line);
        out.push_str("\r\n");
    }
}

/// The INFO text for the given section arguments (Redis's
/// `genInfoSectionDict` + `genRedisInfoString`).
pub fn info_text(ctx: &Ctx, args: &[&[u8]]) -> String {
    let mut wanted: Vec<String> = Vec::new();
    let mut all = false;
    if args.is_empty() {
        wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    for arg in args {
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        match name.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            "all" | "everything" => all = true,
            _ => wanted.push(name),
        }
    }
    let want = |name: &str| all || wanted.iter().any(|w| w == name);
    let mut out = String::new();
    if want("server") {
        info_server(ctx, &mut out);
    }
    if want("clients") {
        info_clients(ctx, &mut out);
    }
    if want("memory") {
        info_memory(ctx, &mut out);
    }
    if want("persistence") {
        info_persistence(ctx, &mut out);
    }
    if want("stats") {
        info_stats(ctx, &mut out);
    }
    if want("replication") {
        info_replication(&mut out);
    }
    if want("cpu") {
        info_cpu(&mut out);
    }
    if want("module_list") || want("modules") {
        section(&mut out, "Modules", &[]);
    }
    if want("commandstats") {
        section(&mut out, "Commandstats", &[]);
    }
    if want("errorstats") {
        section(&mut out, "Errorstats", &[]);
    }
    if want("latencystats") {
        section(&mut out, "Latencystats", &[]);
    }
    if want("cluster") {
        section(&mut out, "Cluster", &["cluster_enabled:0".to_string()]);
    }
    if want("keyspace") {
        info_keyspace(ctx, &mut out);
    }
    out
}

fn info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Verbatim(
        *b"txt",
        info_text(ctx, &argv[1..]).into_bytes(),
    ))
}

// ---------------------------------------------------------------------------
// CONFIG

const CONFIG_HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

fn config_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, CONFIG_HELP))
}

fn config_get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Names are reported as asked for (an exact name keeps the client's
    // spelling and case, an alias stays an alias); each at most once.
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let seen = |found: &Vec<(Vec<u8>, Vec<u8>)>, name: &[u8]| {
        found.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    for &pattern in &argv[2..] {
        if !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
            if seen(&found, pattern) {
                continue;
            }
            if let Some(param) = config::lookup(pattern) {
                found.push((pattern.to_vec(), param.get(&ctx.core.config)));
            }
            continue;
        }
        for param in config::PARAMS {
            for name in param.names() {
                if !seen(&found, name.as_bytes())
                    && crate::glob::matches(pattern, name.as_bytes(), true)
                {
                    found.push((name.as_bytes().to_vec(), param.get(&ctx.core.config)));
                }
            }
        }
    }
    Ok(Reply::Map(
        found
            .into_iter()
            .map(|(n, v)| (Reply::Bulk(n), Reply::Bulk(v)))
            .collect(),
    ))
}

fn config_set(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() % 2 == 1 {
        return super::syntax_error();
    }
    // Redis checks every name first (so an unknown name wins over other
    // errors), then sets all values on a copy, then applies: a failure
    // anywhere leaves the configuration as it was.
    let mut unknown: Option<&[u8]> = None;
    let mut refused: Option<(&[u8], &str)> = None;
    let mut chosen: Vec<(&'static config::Param, &'static str, &[u8])> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        let Some(param) = config::lookup(name) else {
            // Only the first error is reported, whichever kind it is.
            if unknown.is_none() && refused.is_none() {
                unknown = Some(name);
            }
            continue;
        };
        if unknown.is_some() || refused.is_some() {
            continue;
        }
        if param.flags & config::IMMUTABLE != 0 {
            refused = Some((name, "can't set immutable config"));
            continue;
        }
        if param.flags & config::PROTECTED != 0 {
            refused = Some((name, "can't set protected config"));
            continue;
        }
        if chosen.iter().any(|(p, _, _)| std::ptr::eq(*p, param)) {
            refused = Some((name, "duplicate parameter"));
            continue;
        }
        // The name errors report: the one the parameter was found under.
        let shown = param
            .names()
            .find(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .unwrap_or(param.name);
        chosen.push((param, shown, value));
    }
    if let Some(name) = unknown {
        let mut msg = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
        msg.extend_from_slice(name);
        msg.push(b'\'');
        return Err(Reply::error(super::error_text(&msg)));
    }
    if let Some((name, why)) = refused {
        let mut msg = b"ERR CONFIG SET failed (possibly related to argument '".to_vec();
        msg.extend_from_slice(name);
        msg.extend_from_slice(b"') - ");
        msg.extend_from_slice(why.as_bytes());
        return Err(Reply::error(super::error_text(&msg)));
    }
    let failed = |name: &str, why: &str| {
        Err(Reply::error(super::error_text(
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
                .as_bytes(),
        )))
    };
    let old = ctx.core.config.clone();
    let mut new = old.clone();
    for (param, shown, value) in &chosen {
        // A multi-word value is split on single spaces, as Redis does.
        let words: Vec<&[u8]> = if param.is_multi_arg() {
            if value.is_empty() {
                Vec::new()
            } else {
                value.split(|&b| b == b' ').collect()
            }
        } else {
            vec![value]
        };
        if let Err(why) = param.set(&mut new, &words, &mut LoadState::default()) {
            return failed(shown, &why);
        }
    }
    let switch_aof = (new.appendonly != old.appendonly).then_some(new.appendonly);
    if let Some((name, why)) = new.first_unsupported() {
        let shown = chosen
            .iter()
            .find(|(p, _, _)| p.name == name)
            .map_or(name, |c| c.1);
        return failed(shown, why);
    }
    if let Err(why) = ctx.host.apply_config(&old, &new) {
        let port_or_bind = chosen
            .iter()
            .find(|(p, _, _)| p.name == "port" || p.name == "bind");
        return failed(port_or_bind.map_or("bind", |c| c.1), &why);
    }
    if let Some(aof) = ctx.core.aof.as_mut() {
        aof.set_policy(new.appendfsync);
    }
    ctx.core.config = new;
    // appendonly last: turning it on writes the dataset out under the new
    // settings; on failure the old value stays in force.
    match switch_aof {
        Some(true) => {
            ctx.core.config.appendonly = false;
            if let Err(why) = ctx.core.start_aof(ctx.now_ms) {
                return failed("appendonly", &why);
            }
        }
        Some(false) => {
            if let Err(why) = ctx.core.stop_aof() {
                ctx.core.config.appendonly = true;
                return failed("appendonly", &why);
            }
        }
        None => {}
    }
    Ok(Reply::ok())
}

fn config_resetstat(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.core.stats = crate::core::Stats {
        reset_ms: ctx.now_ms,
        ..crate::core::Stats::default()
    };
    Ok(Reply::ok())
}

fn config_rewrite(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.core.config.config_file.is_none() {
        return Err(Reply::err(
            "ERR The server is running without a config file",
        ));
    }
    Err(Reply::err(
        "ERR CONFIG REWRITE is not supported by hozon yet: edit the configuration file instead",
    ))
}

// ---------------------------------------------------------------------------
// SHUTDOWN

/// SHUTDOWN's options.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShutdownOptions {
    /// NOSAVE.
    pub nosave: bool,
    /// SAVE.
    pub save: bool,
    /// FORCE.
    pub force: bool,
}

/// SHUTDOWN's arguments as Redis checks them (`shutdownCommand`): the
/// options, or the syntax error, or ABORT's reply (no shutdown is ever
/// pending: there are no replicas to wait for, so it happens at once).
pub(crate) fn parse_shutdown(argv: &[&[u8]]) -> Result<ShutdownOptions, Reply> {
    let mut options = ShutdownOptions::default();
    let (mut now, mut abort) = (false, false);
    for arg in &argv[1..] {
        if is(arg, "nosave") {
            options.nosave = true;
        } else if is(arg, "save") {
            options.save = true;
        } else if is(arg, "now") {
            now = true;
        } else if is(arg, "force") {
            options.force = true;
        } else if is(arg, "abort") {
            abort = true;
        } else {
            return super::syntax_error();
        }
    }
    let any = options.nosave || options.save || now || options.force;
    if (abort && any) || (options.nosave && options.save) {
        return super::syntax_error();
    }
    if abort {
        return Err(Reply::err("ERR No shutdown in progress."));
    }
    Ok(options)
}

fn shutdown(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let ShutdownOptions {
        nosave,
        save,
        force,
    } = parse_shutdown(argv)?;
    let warn = |ctx: &mut Ctx, msg: &str| ctx.host.log(config::LogLevel::Warning, msg);
    warn(ctx, "User requested shutdown...");
    if ctx.core.aof_waiting_for_rewrite() {
        // The first AOF of CONFIG SET appendonly yes is not in place yet:
        // exiting now would leave the data in no AOF (Redis 7.0 refuses too).
        if force {
            warn(ctx, "Writing initial AOF. Exit anyway.");
        } else {
            warn(ctx, "Writing initial AOF, can't exit.");
            warn(
                ctx,
                "Errors trying to shut down the server. Check the logs for more information.",
            );
            return Err(Reply::err("ERR Errors trying to SHUTDOWN. Check logs."));
        }
    }
    if save || (!nosave && !ctx.core.config.save.is_empty()) {
        ctx.host.log(
            config::LogLevel::Notice,
            "Saving the final snapshot before exiting.",
        );
        match ctx.core.save_now(ctx.now_ms) {
            Ok(()) => ctx.host.log(config::LogLevel::Notice, "DB saved on disk"),
            Err(cause) if force => {
                warn(
                    ctx,
                    &format!("Error trying to save the DB ({cause}). Exit anyway."),
                );
            }
            Err(cause) => {
                warn(
                    ctx,
                    &format!("Error trying to save the DB, can't exit: {cause}"),
                );
                warn(
                    ctx,
                    "Errors trying to shut down the server. Check the logs for more information.",
                );
                return Err(Reply::err("ERR Errors trying to SHUTDOWN. Check logs."));
            }
        }
    } else {
        // A running BGSAVE is abandoned (its temporary file is removed).
        let core = &mut *ctx.core;
        core.save.abort(&mut core.keyspace);
    }
    {
        // So is a running AOF rewrite: the old file stays the AOF.
        let core = &mut *ctx.core;
        core.rewrite.abort(&mut core.keyspace);
    }
    if ctx.host.request_shutdown() {
        // The server exits without sending this reply, as Redis does.
        Ok(Reply::ok())
    } else {
        Err(Reply::err(
            "ERR SHUTDOWN is not available in an embedded engine",
        ))
    }
}
