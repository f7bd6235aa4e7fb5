//! Connection and server commands: PING ECHO SELECT HELLO AUTH QUIT RESET
//! CLIENT COMMAND INFO CONFIG TIME SHUTDOWN.
//!
//! Replies follow Redis 7.0.15 byte for byte. A few values are ours by
//! nature (INFO's process facts, CLIENT LIST's addresses and buffer sizes)
//! and are documented where they are produced. Two things are reported as
//! Redis reports them on purpose: HELLO and INFO say `redis` 7.0.15,
//! because client libraries switch features on that version.
//!
//! This file holds the family's table, the connection commands and
//! SHUTDOWN; the larger handlers are in `server/`: `client.rs` (CLIENT),
//! `introspection.rs` (COMMAND), `info.rs` (INFO), `config_cmd.rs` (CONFIG).

use std::time::{SystemTime, UNIX_EPOCH};

use super::{is, CmdResult, CommandSpec, Ctx, Session};
use crate::reply::Reply;

pub(crate) mod client;
mod config_cmd;
mod info;
mod introspection;
pub(crate) mod tracking;

use client::{
    client_getname, client_help, client_id, client_info, client_kill, client_list, client_no_evict,
    client_pause, client_reply, client_setname, client_unblock, client_unpause,
};
use config_cmd::{config_get, config_help, config_resetstat, config_rewrite, config_set};
use info::info;
use introspection::{
    command, command_count, command_docs, command_getkeys, command_getkeysandflags, command_help,
    command_info, command_list,
};
use tracking::{client_caching, client_getredir, client_tracking, client_trackinginfo};

/// The Redis version hozon is compatible with, reported to clients.
pub const REDIS_VERSION: &str = "7.0.15";

macro_rules! spec {
    ($name:expr, $group:expr, $handler:expr) => {
        spec!($name, $name, $group, $handler, &[])
    };
    ($name:expr, $group:expr, $handler:expr, $subs:expr) => {
        spec!($name, $name, $group, $handler, $subs)
    };
    ($name:expr, $full:expr, $group:expr, $handler:expr, $subs:expr) => {
        CommandSpec::from_docs($name, $full, $group, $handler).with_subcommands($subs)
    };
}

/// A subcommand spec whose handler first records the full name
/// (`client|list`) as the client's last command, which CLIENT LIST shows
/// (the dispatcher records the subcommand's own name only).
macro_rules! sub {
    ($name:expr, $full:expr, $group:expr, $handler:expr) => {
        spec!(
            $name,
            $full,
            $group,
            {
                fn with_full_name(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
                    ctx.session.last_command = $full;
                    $handler(ctx, argv)
                }
                with_full_name
            },
            &[]
        )
    };
}

/// The connection/server family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec!("ping", "connection", ping),
    spec!("echo", "connection", echo),
    spec!("select", "connection", select),
    spec!("hello", "connection", hello),
    spec!("auth", "connection", auth),
    spec!("quit", "connection", quit),
    spec!("reset", "connection", reset),
    spec!(
        "client",
        "connection",
        super::container_handler,
        CLIENT_SUBCOMMANDS
    ),
    // COMMAND runs without a subcommand too (the whole table), which the
    // dispatcher does not do for containers: it dispatches its own
    // subcommands (COMMAND_SUBCOMMANDS).
    spec!("command", "server", command),
    spec!("info", "server", info),
    spec!(
        "config",
        "server",
        super::container_handler,
        CONFIG_SUBCOMMANDS
    ),
    spec!("time", "server", time),
    spec!("role", "server", role),
    spec!("shutdown", "server", shutdown),
];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    sub!("getname", "client|getname", "connection", client_getname),
    sub!("help", "client|help", "connection", client_help),
    sub!("id", "client|id", "connection", client_id),
    sub!("info", "client|info", "connection", client_info),
    sub!("kill", "client|kill", "connection", client_kill),
    sub!("list", "client|list", "connection", client_list),
    sub!("no-evict", "client|no-evict", "connection", client_no_evict),
    sub!("pause", "client|pause", "connection", client_pause),
    sub!("reply", "client|reply", "connection", client_reply),
    sub!("unblock", "client|unblock", "connection", client_unblock),
    sub!("unpause", "client|unpause", "connection", client_unpause),
    sub!("setname", "client|setname", "connection", client_setname),
    sub!("tracking", "client|tracking", "connection", client_tracking),
    sub!("caching", "client|caching", "connection", client_caching),
    sub!("getredir", "client|getredir", "connection", client_getredir),
    sub!(
        "trackinginfo",
        "client|trackinginfo",
        "connection",
        client_trackinginfo
    ),
];

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    sub!("count", "command|count", "server", command_count),
    sub!("docs", "command|docs", "server", command_docs),
    sub!("getkeys", "command|getkeys", "server", command_getkeys),
    sub!(
        "getkeysandflags",
        "command|getkeysandflags",
        "server",
        command_getkeysandflags
    ),
    sub!("help", "command|help", "server", command_help),
    sub!("info", "command|info", "server", command_info),
    sub!("list", "command|list", "server", command_list),
];

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    sub!("get", "config|get", "server", config_get),
    sub!("help", "config|help", "server", config_help),
    sub!("resetstat", "config|resetstat", "server", config_resetstat),
    sub!("rewrite", "config|rewrite", "server", config_rewrite),
    sub!("set", "config|set", "server", config_set),
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

/// ROLE: a master's `["master", <offset>, [<replica>...]]` (Redis's
/// `roleCommand`; no replicas until replication runs, issue 25).
fn role(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if let Some(reply) = super::replicaof::role_reply(ctx) {
        return Ok(reply);
    }
    let repl = &ctx.core.repl;
    // Redis lists the online replicas.
    let replicas = repl
        .replicas
        .values()
        .filter(|r| r.state == crate::core::repl::ReplicaState::Online && !r.conf.rdb_only)
        .map(|r| {
            Reply::Array(vec![
                Reply::Bulk(r.ip.clone().into_bytes()),
                Reply::Bulk(r.conf.listening_port.to_string().into_bytes()),
                Reply::Bulk(r.ack_off.to_string().into_bytes()),
            ])
        })
        .collect();
    Ok(Reply::Array(vec![
        Reply::Bulk(b"master".to_vec()),
        Reply::Int(repl.master_repl_offset()),
        Reply::Array(replicas),
    ]))
}

fn quit(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.session.close_after_reply = true;
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------
// AUTH HELLO RESET

/// Logs the client in as `user` when the credentials are right (Redis's
/// `ACLAuthenticateUser`); a failure goes to ACL LOG (reason `auth`, the
/// command's name as sent).
fn authenticate(ctx: &mut Ctx, argv: &[&[u8]], user: &[u8], password: &[u8]) -> bool {
    if !ctx.core.acl.credentials_ok(user, password) {
        let context = if ctx.session.multi.is_some() {
            crate::acl::Context::Multi
        } else {
            crate::acl::Context::Toplevel
        };
        let cmd = if is(argv[0], "hello") {
            "hello"
        } else {
            "auth"
        };
        super::acl::log_refusal(
            ctx.core,
            ctx.session,
            &*ctx.host,
            crate::acl::Reason::Auth,
            context,
            argv[0],
            user,
            argv,
            cmd,
        );
        return false;
    }
    ctx.session.authenticated = true;
    ctx.session.user = user.to_vec();
    true
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn auth(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return super::syntax_error();
    }
    let (user, password): (&[u8], &[u8]) = if argv.len() == 2 {
        if ctx.core.acl.default_user().nopass {
            return Err(Reply::err(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        (b"default", argv[1])
    } else {
        (argv[1], argv[2])
    };
    if authenticate(ctx, argv, user, password) {
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
            if !authenticate(ctx, argv, argv[j + 1], argv[j + 2]) {
                return Err(Reply::err(WRONGPASS));
            }
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
    ctx.core.tracking.disable(ctx.session.id);
    super::monitor::stop(ctx.core, ctx.session);
    let session = &mut *ctx.session;
    session.db = 0;
    session.resp = 2;
    session.authenticated = ctx.core.acl.default_needs_no_auth();
    session.user = b"default".to_vec();
    session.name = None;
    session.reply_off = false;
    session.reply_skip = false;
    session.reply_skip_next = false;
    Ok(Reply::simple("RESET"))
}

// ---------------------------------------------------------------------------
// SHUTDOWN

/// SHUTDOWN's options (also what a signal's shutdown uses: none set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownOptions {
    /// NOSAVE: no snapshot, even with save points.
    pub nosave: bool,
    /// SAVE: a snapshot, even without save points.
    pub save: bool,
    /// NOW: no waiting for lagging replicas.
    pub now: bool,
    /// FORCE: exit even if the snapshot or the first AOF cannot be written.
    pub force: bool,
}

/// What a SHUTDOWN asks for.
pub(crate) enum ShutdownRequest {
    /// Shut down with these options.
    Shutdown(ShutdownOptions),
    /// ABORT: cancel a shutdown in progress.
    Abort,
}

/// SHUTDOWN's arguments as Redis checks them (`shutdownCommand`): the
/// request, or the syntax error.
pub(crate) fn parse_shutdown(argv: &[&[u8]]) -> Result<ShutdownRequest, Reply> {
    let mut options = ShutdownOptions::default();
    let mut abort = false;
    for arg in &argv[1..] {
        if is(arg, "nosave") {
            options.nosave = true;
        } else if is(arg, "save") {
            options.save = true;
        } else if is(arg, "now") {
            options.now = true;
        } else if is(arg, "force") {
            options.force = true;
        } else if is(arg, "abort") {
            abort = true;
        } else {
            return super::syntax_error();
        }
    }
    if (abort && options != ShutdownOptions::default()) || (options.nosave && options.save) {
        return super::syntax_error();
    }
    Ok(if abort {
        ShutdownRequest::Abort
    } else {
        ShutdownRequest::Shutdown(options)
    })
}

/// SHUTDOWN: the host carries it out (server/shutdown.rs) after the
/// command; the caller gets no reply unless it fails.
fn shutdown(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match parse_shutdown(argv)? {
        ShutdownRequest::Abort if ctx.host.abort_shutdown() => Ok(Reply::ok()),
        ShutdownRequest::Abort => Err(Reply::err("ERR No shutdown in progress.")),
        ShutdownRequest::Shutdown(options) if ctx.host.request_shutdown(options) => {
            // Not sent: the server exits, or answers with the failure.
            Ok(Reply::ok())
        }
        ShutdownRequest::Shutdown(_) => Err(Reply::err(
            "ERR SHUTDOWN is not available in an embedded engine",
        )),
    }
}
