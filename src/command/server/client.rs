//! CLIENT and its subcommands.

use super::{help_reply, set_client_name};
use crate::command::ctx::{Connection, Host};
use crate::command::{is, CmdResult, Ctx, Session};
use crate::core::tracking::TrackState;
use crate::core::Core;
use crate::reply::Reply;

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

pub(super) fn client_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, CLIENT_HELP))
}

pub(super) fn client_id(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.session.id as i64))
}

pub(super) fn client_getname(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(match &ctx.session.name {
        Some(name) => Reply::bulk(name),
        None => Reply::Null,
    })
}

pub(super) fn client_setname(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_client_name(ctx.session, argv[2])?;
    Ok(Reply::ok())
}

pub(super) fn client_reply(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
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
        crate::command::syntax_error()
    }
}

pub(super) fn client_unblock(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 4 {
        return Err(crate::command::subcommand_syntax_error(argv));
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
    let id = crate::command::parse_int(argv[2])?;
    let unblocked = id >= 0 && ctx.host.unblock_client(id as u64, with_error);
    if unblocked && with_error {
        // Redis replies the UNBLOCKED error to the blocked client within
        // this command: counted now (CLIENT UNBLOCK fails in commandstats).
        ctx.core
            .observe
            .count_error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
    }
    Ok(Reply::Int(i64::from(unblocked)))
}

/// CLIENT PAUSE timeout [WRITE|ALL]: Redis 7.0's errors, in its order
/// (the mode, then the timeout); a pause already in force keeps the
/// stricter mode and the later end. `0` ends at once.
pub(super) fn client_pause(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    use crate::core::{PauseMode, PausePurpose};
    if argv.len() > 4 {
        return Err(crate::command::subcommand_syntax_error(argv));
    }
    let mode = match argv.get(3) {
        None => PauseMode::All,
        Some(m) if is(m, "write") => PauseMode::Write,
        Some(m) if is(m, "all") => PauseMode::All,
        Some(_) => return Err(Reply::err("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let timeout = crate::command::parse_int(argv[2])
        .map_err(|_| Reply::err("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Reply::err("ERR timeout is negative"));
    }
    let now = crate::clock::now_ms();
    let end = if timeout > 0 {
        now.saturating_add(timeout)
    } else {
        0
    };
    ctx.core
        .pauses
        .pause_until(PausePurpose::Client, mode, end, now);
    Ok(Reply::ok())
}

/// CLIENT UNPAUSE: ends CLIENT PAUSE's pause (a shutdown's stays).
pub(super) fn client_unpause(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.core.pauses.unpause(crate::core::PausePurpose::Client);
    Ok(Reply::ok())
}

pub(super) fn client_no_evict(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[2], "on") {
        ctx.session.no_evict = true;
    } else if is(argv[2], "off") {
        ctx.session.no_evict = false;
    } else {
        return crate::command::syntax_error();
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
    tracking: Option<&TrackState>,
) -> String {
    let mut flags = String::new();
    if session.is_replica {
        flags.push('S');
    } else if session.monitor {
        flags.push('O');
    }
    if session.is_master {
        flags.push('M');
    }
    if session.subscribed() {
        flags.push('P');
    }
    if session.multi.is_some() {
        flags.push('x');
    }
    if session.blocked.is_some() {
        flags.push('b');
    }
    if let Some(t) = tracking {
        flags.push('t');
        if t.broken_redirect {
            flags.push('R');
        }
        if t.bcast {
            flags.push('B');
        }
    }
    if dirty_cas {
        flags.push('d');
    }
    if session.close_after_reply {
        flags.push('c');
    }
    if conn.unix {
        flags.push('U');
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
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem=0 rbs={} rbp={} obl=0 oll=0 omem={} tot-mem={} events={} cmd={} user={} redir={} resp={}",
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
        String::from_utf8_lossy(&session.user),
        tracking.map_or(-1, |t| t.redirect as i64),
        session.resp
    )
}

pub(crate) fn current_line(ctx: &Ctx, argv: &[&[u8]], cmd: &str) -> String {
    // Inside EXEC the client's last command is EXEC itself.
    let cmd = if ctx.in_exec { "exec" } else { cmd };
    info_line(ctx.core, ctx.session, &*ctx.host, ctx.now_ms, argv, cmd)
}

/// The CLIENT LIST line of `session` while it runs `cmd` (`argv`), from
/// outside a command handler (ACL LOG's `client-info`).
pub(crate) fn info_line(
    core: &Core,
    session: &Session,
    host: &dyn Host,
    now_ms: i64,
    argv: &[&[u8]],
    cmd: &str,
) -> String {
    let conn = host.connection().unwrap_or_else(|| Connection {
        events: "r",
        last_interaction_ms: now_ms,
        ..Connection::default()
    });
    let argv_mem = argv.iter().map(|a| a.len()).sum();
    let dirty = core.clients.is_dirty(session.id);
    let tracking = core.tracking.state(session.id);
    client_line(
        session,
        &conn,
        now_ms,
        Some((cmd, argv_mem)),
        dirty,
        tracking,
    )
}

/// A client type CLIENT LIST/KILL TYPE names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Pubsub,
    /// `replica`/`slave`: a connection that sent SYNC or PSYNC.
    Replica,
    /// `master`: the link to our master (none while hozon is a master).
    Master,
}

impl ClientType {
    fn parse(name: &[u8]) -> Result<ClientType, Reply> {
        if is(name, "normal") {
            Ok(ClientType::Normal)
        } else if is(name, "pubsub") {
            Ok(ClientType::Pubsub)
        } else if is(name, "slave") || is(name, "replica") {
            Ok(ClientType::Replica)
        } else if is(name, "master") {
            Ok(ClientType::Master)
        } else {
            let mut msg = b"ERR Unknown client type '".to_vec();
            msg.extend_from_slice(name);
            msg.push(b'\'');
            Err(Reply::error(crate::command::error_text(&msg)))
        }
    }

    /// Redis's getClientType: a subscribed client is `pubsub`.
    fn of(session: &Session) -> ClientType {
        if session.is_master {
            ClientType::Master
        } else if session.is_replica {
            ClientType::Replica
        } else if session.subscribed() {
            ClientType::Pubsub
        } else {
            ClientType::Normal
        }
    }
}

pub(super) fn client_info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut line = current_line(ctx, argv, "client|info");
    line.push('\n');
    Ok(Reply::Verbatim(*b"txt", line.into_bytes()))
}

pub(super) fn client_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
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
        return crate::command::syntax_error();
    }
    let mut lines: Vec<(u64, String)> = Vec::new();
    let included = |session: &Session| wanted.is_none_or(|t| t == ClientType::of(session));
    if included(ctx.session) {
        lines.push((ctx.session.id, current_line(ctx, argv, "client|list")));
    }
    let now = ctx.now_ms;
    let clients = &ctx.core.clients;
    let tracking = &ctx.core.tracking;
    ctx.host.for_each_client(&mut |session, conn| {
        if included(session) {
            let dirty = clients.is_dirty(session.id);
            let t = tracking.state(session.id);
            lines.push((session.id, client_line(session, conn, now, None, dirty, t)))
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
    user: Option<Vec<u8>>,
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
            && self.user.as_deref().is_none_or(|u| u == session.user)
    }
}

pub(super) fn client_kill(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
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
                if ctx.core.acl.get(argv[i + 1]).is_none() {
                    let mut msg = b"ERR No such user '".to_vec();
                    msg.extend_from_slice(argv[i + 1]);
                    msg.push(b'\'');
                    return Err(Reply::error(crate::command::error_text(&msg)));
                }
                filter.user = Some(argv[i + 1].to_vec());
            } else if is(opt, "skipme") && more {
                if is(argv[i + 1], "yes") {
                    filter.skipme = true;
                } else if is(argv[i + 1], "no") {
                    filter.skipme = false;
                } else {
                    return crate::command::syntax_error();
                }
            } else {
                return crate::command::syntax_error();
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
