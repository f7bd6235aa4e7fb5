//! Generic key commands.

use super::{flags::*, CmdResult, CommandSpec, Ctx};
use crate::reply::Reply;

/// The generic family's table.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "del",
    arity: -2,
    flags: WRITE,
    first_key: 1,
    last_key: -1,
    key_step: 1,
    group: "generic",
    handler: del,
    subcommands: &[],
}];

fn del(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut deleted = 0;
    for key in &argv[1..] {
        if ctx.delete_key(key) {
            deleted += 1;
        }
    }
    ctx.dirty(deleted);
    Ok(Reply::Int(deleted as i64))
}
