//! SLOWLOG GET/LEN/RESET/HELP (Redis's slowlog.c); the log itself is
//! `core::stats_slowlog`, filled by the dispatch.

use crate::command::{parse_int, subcommand_syntax_error, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;

/// SLOWLOG's subcommands.
pub(super) static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("get", "slowlog|get", "server", slowlog_get),
    CommandSpec::from_docs("help", "slowlog|help", "server", slowlog_help),
    CommandSpec::from_docs("len", "slowlog|len", "server", slowlog_len),
    CommandSpec::from_docs("reset", "slowlog|reset", "server", slowlog_reset),
];

const HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

fn slowlog_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(crate::command::server::help_reply(argv, HELP))
}

fn slowlog_len(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.core.observe.slowlog.len() as i64))
}

fn slowlog_reset(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    ctx.core.observe.slowlog.reset();
    Ok(Reply::ok())
}

fn slowlog_get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return Err(subcommand_syntax_error(argv));
    }
    let log = &ctx.core.observe.slowlog;
    let mut count = 10usize;
    if let Some(arg) = argv.get(2) {
        // Redis's getRangeLongFromObjectOrReply with a message: the same
        // error for a non-number and for one out of range.
        let n = parse_int(arg).unwrap_or(i64::MIN);
        if n < -1 {
            return Err(Reply::err(
                "ERR count should be greater than or equal to -1",
            ));
        }
        count = if n == -1 { log.len() } else { n as usize };
    }
    let entries = log
        .entries()
        .take(count)
        .map(|e| {
            Reply::Array(vec![
                Reply::Int(e.id as i64),
                Reply::Int(e.time),
                Reply::Int(e.duration_us as i64),
                Reply::Array(e.argv.iter().map(|a| Reply::bulk(a)).collect()),
                Reply::bulk(e.peer.as_bytes()),
                Reply::bulk(&e.name),
            ])
        })
        .collect();
    Ok(Reply::Array(entries))
}
