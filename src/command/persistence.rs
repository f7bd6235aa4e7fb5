//! SAVE, BGSAVE and LASTSAVE (Redis's `rdb.c` commands) over hozon's
//! native snapshot, `dump.hoz` (see docs/snapshot-format.md and
//! `persist::saver`).

use super::flags::*;
use super::{CmdResult, CommandSpec, Ctx};
use crate::config::LogLevel;
use crate::reply::Reply;

const SERVER: &str = "server";

/// The snapshot commands (flags and arity from Redis 7.0.15).
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("save", 1, ADMIN | NOSCRIPT | NO_MULTI, (0, 0, 0), SERVER, save),
    CommandSpec::new("bgsave", -1, ADMIN | NOSCRIPT, (0, 0, 0), SERVER, bgsave),
    CommandSpec::new("lastsave", 1, LOADING | STALE | FAST, (0, 0, 0), SERVER, lastsave),
];

fn save(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.core.save.in_progress() {
        return Err(Reply::err("ERR Background save already in progress"));
    }
    match ctx.core.save_now(ctx.now_ms) {
        Ok(()) => {
            ctx.host.log(LogLevel::Notice, "DB saved on disk");
            Ok(Reply::ok())
        }
        Err(cause) => {
            ctx.host.log(
                LogLevel::Warning,
                &format!("Error saving DB on disk: {cause}"),
            );
            Err(Reply::err("ERR"))
        }
    }
}

fn bgsave(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let schedule = match argv.len() {
        1 => false,
        2 if super::is(argv[1], "schedule") => true,
        _ => return super::syntax_error(),
    };
    if ctx.core.save.in_progress() {
        return Err(Reply::err("ERR Background save already in progress"));
    }
    if ctx.in_exec {
        // Redis schedules a BGSAVE requested inside a transaction.
        ctx.core.save.scheduled = true;
        return Ok(Reply::simple("Background saving scheduled"));
    }
    let _ = schedule; // nothing else runs in the background to wait for
    match ctx.core.start_bgsave(ctx.now_ms) {
        Ok(()) => {
            ctx.host.log(LogLevel::Notice, "Background saving started");
            Ok(Reply::simple("Background saving started"))
        }
        Err(cause) => {
            ctx.host.log(
                LogLevel::Warning,
                &format!("Can't save in background: {cause}"),
            );
            Err(Reply::err("ERR"))
        }
    }
}

fn lastsave(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.core.save.last_save_ms / 1000))
}
