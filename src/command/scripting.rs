//! Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
//! (Redis's `eval.c`). The Lua side lives in [`crate::script`].

use super::flags::MAY_REPLICATE;
use super::{is, CmdResult, CommandSpec, Ctx};
use crate::core::Core;
use crate::reply::Reply;
use crate::script::{Scripting, NOSCRIPT_ERR, NOTBUSY_ERR};

const SCRIPTING: &str = "scripting";

/// The scripting commands (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
///
/// EVAL and EVALSHA add `may_replicate`: Redis 7.0's own table sets it on
/// them, but COMMAND INFO never prints it, so the generated metadata lacks
/// it. The bit is kept as Redis's table has it: script calls refuse a
/// `may_replicate` command in a read-only script ([`crate::script`]),
/// though for these two the `noscript` refusal comes first today.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("eval", "eval", SCRIPTING, eval).with_extra_flags(MAY_REPLICATE),
    CommandSpec::from_docs("eval_ro", "eval_ro", SCRIPTING, eval_ro),
    CommandSpec::from_docs("evalsha", "evalsha", SCRIPTING, evalsha)
        .with_extra_flags(MAY_REPLICATE),
    CommandSpec::from_docs("evalsha_ro", "evalsha_ro", SCRIPTING, evalsha_ro),
    CommandSpec::from_docs("script", "script", SCRIPTING, super::container_handler)
        .with_subcommands(SCRIPT_SUBCOMMANDS),
];

static SCRIPT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("debug", "script|debug", SCRIPTING, script_debug),
    CommandSpec::from_docs("exists", "script|exists", SCRIPTING, script_exists),
    CommandSpec::from_docs("flush", "script|flush", SCRIPTING, script_flush),
    CommandSpec::from_docs("help", "script|help", SCRIPTING, script_help),
    CommandSpec::from_docs("kill", "script|kill", SCRIPTING, script_kill),
    CommandSpec::from_docs("load", "script|load", SCRIPTING, script_load),
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
    super::monitor::feed_self(ctx, argv);
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
        ctx.core.script_run.start(None, &[], ctx.now_ms);
        let reply = scripting.run(ctx, &sha, keys, args, read_only);
        ctx.core.script_run.end();
        reply
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
