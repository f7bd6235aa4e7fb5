//! SAVE, BGSAVE and LASTSAVE (Redis's `rdb.c` commands) over hozon's
//! native snapshot, `dump.hoz` (see docs/snapshot-format.md and
//! `persist::saver`), and BGREWRITEAOF (`persist::rewriter`).

use super::{CmdResult, CommandSpec, Ctx};
use crate::config::LogLevel;
use crate::reply::Reply;

const SERVER: &str = "server";

/// The snapshot commands (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("save", "save", SERVER, save),
    CommandSpec::from_docs("bgsave", "bgsave", SERVER, bgsave),
    CommandSpec::from_docs("lastsave", "lastsave", SERVER, lastsave),
    CommandSpec::from_docs("bgrewriteaof", "bgrewriteaof", SERVER, bgrewriteaof),
];

fn save(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.core.rdb_child_active() {
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
    if ctx.core.rdb_child_active() {
        return Err(Reply::err("ERR Background save already in progress"));
    }
    if ctx.core.rewrite.in_progress() || ctx.in_exec {
        // One capture at a time (Redis: one child); inside a transaction
        // Redis schedules too.
        if schedule || ctx.in_exec {
            ctx.core.save.scheduled = true;
            return Ok(Reply::simple("Background saving scheduled"));
        }
        return Err(Reply::err(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. \
             Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        ));
    }
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

fn bgrewriteaof(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    if ctx.core.rewrite.in_progress() {
        return Err(Reply::err(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    if ctx.core.rdb_child_active() || ctx.in_exec {
        ctx.core.rewrite.scheduled = true;
        // A rewrite asked for by hand is not held back by earlier failures.
        ctx.core.rewrite.consecutive_failures = 0;
        return Ok(Reply::simple(
            "Background append only file rewriting scheduled",
        ));
    }
    match ctx.core.start_rewrite(ctx.now_ms) {
        Ok(()) => {
            ctx.host.log(
                LogLevel::Notice,
                "Background append only file rewriting started",
            );
            Ok(Reply::simple(
                "Background append only file rewriting started",
            ))
        }
        Err(cause) => {
            ctx.host.log(
                LogLevel::Warning,
                &format!("Can't rewrite append only file in background: {cause}"),
            );
            Err(Reply::err(
                "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
            ))
        }
    }
}
