//! MONITOR, and the hooks through which commands reach the monitors
//! (the registry and the line format are `core::monitor`'s).
//!
//! Redis 7.0 feeds monitors from `call()` after a command ran, except for
//! commands flagged `admin` or `skip_monitor`; EVAL, EVALSHA and FCALL
//! (`skip_monitor`) feed themselves before their script runs so that the
//! script's commands come after them; an EXEC refused before it ran is
//! still fed (`execCommandAbort`). [`feed_call`] is the `call()` part (the
//! dispatch, EXEC's nested commands, and scripts' commands with
//! [`Origin::Script`]); [`feed_self`] the scripts' part.

use super::flags::{ADMIN, SKIP_MONITOR};
use super::{CmdResult, CommandSpec, Ctx, Host};
use crate::core::monitor::Origin;
use crate::core::Core;
use crate::reply::Reply;

/// The MONITOR table (arity and flags from the generated metadata).
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::from_docs(
    "monitor", "monitor", "server", monitor,
)];

/// MONITOR: from now on the client receives a line per command run and
/// can only send commands that do not touch the keyspace (Redis marks it
/// a replica) until RESET or QUIT.
fn monitor(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.deny_blocking {
        // Inside EXEC: Redis's CLIENT_DENY_BLOCKING.
        return Err(Reply::err(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    if ctx.session.is_replica || ctx.session.monitor {
        // Already a replica or a monitor: ignored, with no reply.
        return Ok(Reply::Frames(Vec::new()));
    }
    ctx.session.monitor = true;
    ctx.core.monitors.add(ctx.session.id);
    Ok(Reply::ok())
}

/// Ends MONITOR mode for the session (RESET, or the client went away).
pub(crate) fn stop(core: &mut Core, session: &mut crate::core::Session) {
    if session.monitor {
        session.monitor = false;
        core.monitors.remove(session.id);
    }
}

/// `call()`'s feed after a command the client `session` sent ran (the
/// dispatch): `reply` with the monitor line after it when the client is a
/// monitor itself. Call only when `core.monitors.active()`.
pub(crate) fn after_call(
    core: &mut Core,
    spec: &CommandSpec,
    argv: &[&[u8]],
    session: &crate::core::Session,
    host: &dyn Host,
    reply: Reply,
) -> Reply {
    if spec.flags & (ADMIN | SKIP_MONITOR) != 0 {
        return reply;
    }
    if session.reply_skip && session.reply_skip_next {
        // CLIENT REPLY SKIP just ran: its reply is not sent, but its own
        // line is (Redis skips from the next command on). Through the
        // outbox, which lets it pass in this state.
        feed(core, argv, session.db, Some(host), None);
        return reply;
    }
    match feed(core, argv, session.db, Some(host), Some(session.id)) {
        // A client closing after this reply (QUIT) takes no more output.
        Some(own) if !session.close_after_reply => {
            Reply::Frames(vec![reply, own.to_reply(session.resp)])
        }
        _ => reply,
    }
}

/// `call()`'s feed after `spec` ran with `argv` in `db` inside EXEC or a
/// script: nothing for `admin` and `skip_monitor` commands. `host` gives
/// the client's address; `None` for a script's command (`[db lua]`).
/// Call only when `core.monitors.active()`.
pub(crate) fn feed_call(
    core: &mut Core,
    spec: &CommandSpec,
    argv: &[&[u8]],
    db: usize,
    host: Option<&dyn Host>,
) {
    if spec.flags & (ADMIN | SKIP_MONITOR) != 0 {
        return;
    }
    feed(core, argv, db, host, None);
}

/// Feeds `argv` whatever its flags (EVAL, EVALSHA and FCALL before their
/// script, an EXEC refused before it ran); returns `current`'s own line.
pub(crate) fn feed(
    core: &mut Core,
    argv: &[&[u8]],
    db: usize,
    host: Option<&dyn Host>,
    current: Option<u64>,
) -> Option<crate::core::clients::Message> {
    match host {
        Some(host) => {
            let addr = host.connection().map(|c| c.addr).unwrap_or_default();
            core.feed_monitors(db, Origin::Client(&addr), argv, current)
        }
        None => core.feed_monitors(db, Origin::Script, argv, current),
    }
}

/// The scripts' own feed, at the start of EVAL, EVALSHA and FCALL: from
/// the client, or `lua` when the script command is itself run by a script.
pub(crate) fn feed_self(ctx: &mut Ctx, argv: &[&[u8]]) {
    if !ctx.core.monitors.active() {
        return;
    }
    let db = ctx.session.db;
    let host = (!ctx.in_script).then_some(&*ctx.host);
    feed(ctx.core, argv, db, host, None);
}
