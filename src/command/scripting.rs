//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
//! (Redis's `eval.c`). The Lua side lives in [`crate::script`].

use super::flags::*;
use super::{is, CmdResult, CommandSpec, Ctx};
use crate::core::Core;
use crate::reply::Reply;
use crate::script::{Scripting, NOSCRIPT_ERR, NOTBUSY_ERR};

const SCRIPTING: &str = "scripting";

/// The scripting commands (flags and arity from Redis 7.0.15).
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("eval", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | MOVABLE_KEYS, (0, 0, 0), SCRIPTING, eval),
    CommandSpec::new("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | STALE | READONLY | MOVABLE_KEYS, (0, 0, 0), SCRIPTING, eval_ro),
    CommandSpec::new("evalsha", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | MOVABLE_KEYS, (0, 0, 0), SCRIPTING, evalsha),
    CommandSpec::new("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | STALE | READONLY | MOVABLE_KEYS, (0, 0, 0), SCRIPTING, evalsha_ro),
    CommandSpec {
        subcommands: SCRIPT_SUBCOMMANDS,
        ..CommandSpec::new("script", -2, NONE, (0, 0, 0), SCRIPTING, super::container_handler)
    },
];

#[rustfmt::skip]
static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("debug", 3, NOSCRIPT, (0, 0, 0), SCRIPTING, script_debug),
    CommandSpec::new("exists", -3, NOSCRIPT, (0, 0, 0), SCRIPTING, script_exists),
    CommandSpec::new("flush", -2, NOSCRIPT, (0, 0, 0), SCRIPTING, script_flush),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), SCRIPTING, script_help),
    CommandSpec::new("kill", 2, NOSCRIPT | ALLOW_BUSY, (0, 0, 0), SCRIPTING, script_kill),
    CommandSpec::new("load", 3, NOSCRIPT | STALE, (0, 0, 0), SCRIPTING, script_load),
];

const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

/// The engine's scripting state, when it exists and is not taken out by a
/// running script.
pub fn state(core: &Core) -> Option<&Scripting> {
    core.scripting.get::<Scripting>()
}

/// Runs `f` with the engine's scripting state, creating it on first use.
/// The state is taken out of `Core` for the call (a script's commands
/// borrow `Core` while the Lua state runs them) and put back after.
fn with_scripting(ctx: &mut Ctx, f: impl FnOnce(&mut Scripting, &mut Ctx) -> Reply) -> Reply {
    let mut scripting = match ctx.core.scripting.take::<Scripting>() {
        Some(s) => s,
        None => match Scripting::new() {
            Ok(s) => Box::new(s),
            Err(e) => return Reply::error(format!("ERR {e}")),
        },
    };
    let reply = f(&mut scripting, ctx);
    ctx.core.scripting.put(scripting);
    reply
}

fn eval(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, false, false)
}

fn eval_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, false, true)
}

fn evalsha(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, true, false)
}

fn evalsha_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    eval_generic(ctx, argv, true, true)
}

/// Redis's `evalGenericCommand`.
fn eval_generic(ctx: &mut Ctx, argv: &[&[u8]], by_sha: bool, read_only: bool) -> CmdResult {
    if by_sha && argv[1].len() != 40 {
        return Err(Reply::err(NOSCRIPT_ERR));
    }
    let numkeys = super::parse_int(argv[2])?;
    if numkeys > (argv.len() - 3) as i64 {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(Reply::err("ERR Number of keys can't be negative"));
    }
    let numkeys = numkeys as usize;
    let keys = &argv[3..3 + numkeys];
    let args = &argv[3 + numkeys..];
    // Only the commands the script runs are logged (as one unit).
    ctx.log_nothing();
    let reply = with_scripting(ctx, |scripting, ctx| {
        let sha = if by_sha {
            match crate::script::parse_sha(argv[1]) {
                Some(sha) if scripting.flags(&sha).is_some() => sha,
                _ => return Reply::err(NOSCRIPT_ERR),
            }
        } else {
            match scripting.load(argv[1]) {
                Ok(sha) => sha,
                Err(reply) => return reply,
            }
        };
        scripting.run(ctx, &sha, keys, args, read_only)
    });
    Ok(reply)
}

fn script_load(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(with_scripting(ctx, |scripting, _| {
        match scripting.load(argv[2]) {
            Ok(sha) => Reply::Bulk(sha.to_vec()),
            Err(reply) => reply,
        }
    }))
}

fn script_exists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let scripting = state(ctx.core);
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|sha| Reply::Int(i64::from(scripting.is_some_and(|s| s.exists(sha)))))
            .collect(),
    ))
}

fn script_flush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let valid = match argv.len() {
        2 => true,
        3 => is(argv[2], "sync") || is(argv[2], "async"),
        _ => false,
    };
    if !valid {
        return Err(Reply::err(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    if let Some(scripting) = ctx.core.scripting.get_mut::<Scripting>() {
        scripting
            .flush()
            .map_err(|e| Reply::error(format!("ERR {e}")))?;
    }
    Ok(Reply::ok())
}

fn script_kill(_ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    // A running script is killed by the host while it runs
    // (Host::while_busy); a SCRIPT KILL that reaches the engine finds none.
    Err(Reply::err(NOTBUSY_ERR))
}

fn script_debug(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[2], "no") {
        return Ok(Reply::ok());
    }
    if is(argv[2], "yes") || is(argv[2], "sync") {
        return Err(Reply::err(
            "ERR hozon does not include the Lua debugger (SCRIPT DEBUG YES|SYNC)",
        ));
    }
    Err(Reply::err("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
}

fn script_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(super::server::help_reply(argv, SCRIPT_HELP))
}
