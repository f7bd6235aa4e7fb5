//! String commands.

use super::{flags::*, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;
use crate::types::{Blob, Value};

/// The string family's table.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: READONLY | FAST,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        group: "string",
        handler: get,
        subcommands: &[],
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: WRITE | DENYOOM,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        group: "string",
        handler: set,
        subcommands: &[],
    },
];

fn get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match ctx.read_str(argv[1])? {
        Some(s) => Reply::bulk(s),
        None => Reply::Null,
    })
}

fn set(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() != 3 {
        return super::syntax_error();
    }
    ctx.set_key(argv[1], Value::Str(Blob::new(argv[2])), false);
    ctx.dirty(1);
    Ok(Reply::ok())
}
