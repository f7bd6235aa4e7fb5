//! Connection and server commands.

use super::{flags::*, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;

/// The connection/server family's table.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: FAST,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        group: "connection",
        handler: ping,
        subcommands: &[],
    },
    CommandSpec {
        name: "select",
        arity: 2,
        flags: LOADING | STALE | FAST,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        group: "connection",
        handler: select,
        subcommands: &[],
    },
];

fn ping(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match argv.len() {
        1 => Ok(Reply::simple("PONG")),
        2 => Ok(Reply::bulk(argv[1])),
        _ => Err(super::arity_error("ping")),
    }
}

fn select(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let index = super::parse_int(argv[1]).map_err(|_| Reply::err(super::NOT_INT_ERR))?;
    if index < 0 || index as usize >= ctx.core.keyspace.db_count() {
        return Err(Reply::err("ERR DB index is out of range"));
    }
    ctx.session.db = index as usize;
    Ok(Reply::ok())
}
