//! Redis Functions: FUNCTION LOAD / DELETE / FLUSH / LIST / DUMP / RESTORE
//! / STATS / KILL / HELP and FCALL / FCALL_RO (Redis's `functions.c`).
//! The libraries' sources are persistent data in `Core`
//! ([`crate::core::functions`]); the compiled side is
//! [`crate::script::functions`]. FUNCTION LOAD, DELETE, FLUSH and RESTORE
//! are logged as received (Redis propagates them so); FCALL logs the
//! effects of the commands the function runs, as EVAL does.

use super::{is, subcommand_syntax_error, CmdResult, CommandSpec, Ctx};
use crate::rdb::{opcode, reader, writer};
use crate::reply::Reply;
use crate::script::functions::{self, FunctionEngine, RestorePolicy, ENGINE_NAME};
use crate::script::{NOTBUSY_ERR, SCRIPT_FLAG_NAMES};

const SCRIPTING: &str = "scripting";

/// FCALL, FCALL_RO and FUNCTION (arity, flags and key positions from the
/// generated metadata, [`super::docs`]).
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("fcall", "fcall", SCRIPTING, fcall),
    CommandSpec::from_docs("fcall_ro", "fcall_ro", SCRIPTING, fcall_ro),
    CommandSpec::from_docs("function", "function", SCRIPTING, super::container_handler)
        .with_subcommands(FUNCTION_SUBCOMMANDS),
];

static FUNCTION_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("delete", "function|delete", SCRIPTING, function_delete),
    CommandSpec::from_docs("dump", "function|dump", SCRIPTING, function_dump),
    CommandSpec::from_docs("flush", "function|flush", SCRIPTING, function_flush),
    CommandSpec::from_docs("help", "function|help", SCRIPTING, function_help),
    CommandSpec::from_docs("kill", "function|kill", SCRIPTING, function_kill),
    CommandSpec::from_docs("list", "function|list", SCRIPTING, function_list),
    CommandSpec::from_docs("load", "function|load", SCRIPTING, function_load),
    CommandSpec::from_docs("restore", "function|restore", SCRIPTING, function_restore),
    CommandSpec::from_docs("stats", "function|stats", SCRIPTING, function_stats),
];

const FUNCTION_HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

/// `-BUSY` while an EVAL script runs (Redis's `slowevalerr`).
pub const BUSY_EVAL_ERR: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `-BUSY` while a function runs (Redis's `slowscripterr`).
pub const BUSY_FUNCTION_ERR: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Runs `f` with the function engine (built from the libraries when it
/// does not reflect them), put back after.
pub(crate) fn with_engine<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut FunctionEngine, &mut Ctx) -> Result<R, Reply>,
) -> Result<R, Reply> {
    let mut engine = FunctionEngine::take(&mut ctx.core.function_engine, &mut ctx.core.functions)
        .map_err(|e| Reply::error(format!("ERR {e}")))?;
    let result = f(&mut engine, ctx);
    ctx.core.function_engine.put(engine);
    result
}

fn err(text: String) -> Reply {
    Reply::error(super::error_text(format!("ERR {text}").as_bytes()))
}

fn fcall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, argv, false)
}

fn fcall_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    fcall_generic(ctx, argv, true)
}

/// Redis's `fcallCommandGeneric`.
fn fcall_generic(ctx: &mut Ctx, argv: &[&[u8]], read_only: bool) -> CmdResult {
    super::monitor::feed_self(ctx, argv);
    with_engine(ctx, |engine, ctx| {
        let Some((entry, state)) = engine.function_and_state(argv[1]) else {
            return Err(Reply::err("ERR Function not found"));
        };
        let numkeys = crate::types::num::parse_i64(argv[2])
            .ok_or_else(|| Reply::err("ERR Bad number of keys provided"))?;
        if numkeys > (argv.len() - 3) as i64 {
            return Err(Reply::err(
                "ERR Number of keys can't be greater than number of args",
            ));
        }
        if numkeys < 0 {
            return Err(Reply::err("ERR Number of keys can't be negative"));
        }
        let numkeys = numkeys as usize;
        // Only the commands the function runs are logged (as one unit).
        ctx.log_nothing();
        ctx.core
            .script_run
            .start(Some(entry.name_text.clone()), argv, ctx.now_ms);
        let keys = &argv[3..3 + numkeys];
        let args = &argv[3 + numkeys..];
        let callee = crate::script::Callee {
            callback: &entry.callback,
            flags: entry.flags,
            name: &entry.name_text,
        };
        let reply = state.call_function(ctx, callee, keys, args, read_only);
        ctx.core.script_run.end();
        Ok(reply)
    })
}

/// The load limit for this client: none for the AOF and a master.
fn load_limit(ctx: &Ctx) -> u64 {
    if ctx.core.loading || ctx.session.is_master {
        0
    } else {
        functions::LOAD_TIMEOUT_MS
    }
}

fn function_load(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut replace = false;
    let mut pos = 2;
    while pos < argv.len() - 1 {
        if is(argv[pos], "replace") {
            replace = true;
            pos += 1;
            continue;
        }
        return Err(err(format!(
            "Unknown option given: {}",
            String::from_utf8_lossy(super::c_str(argv[pos]))
        )));
    }
    if pos >= argv.len() {
        return Err(Reply::err("ERR Function code is missing"));
    }
    let code = argv[pos];
    let limit = load_limit(ctx);
    let name = with_engine(ctx, |engine, ctx| {
        engine
            .load(&mut ctx.core.functions, code, replace, limit)
            .map_err(err)
    })?;
    ctx.dirty(1);
    Ok(Reply::Bulk(name))
}

fn function_delete(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    with_engine(ctx, |engine, ctx| {
        engine.delete(&mut ctx.core.functions, argv[2]).map_err(err)
    })?;
    ctx.dirty(1);
    Ok(Reply::ok())
}

fn function_flush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 3 {
        return Err(subcommand_syntax_error(argv));
    }
    if argv.len() == 3 && !is(argv[2], "sync") && !is(argv[2], "async") {
        return Err(Reply::err(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    ctx.core.functions.replace_all(Vec::new());
    ctx.core.function_engine.take::<FunctionEngine>();
    ctx.dirty(1);
    Ok(Reply::ok())
}

fn function_kill(_ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    // A running function is killed by the host while it runs
    // (Host::while_busy); a FUNCTION KILL that reaches the engine finds none.
    Err(Reply::err(NOTBUSY_ERR))
}

fn function_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(super::server::help_reply(argv, FUNCTION_HELP))
}

fn function_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        if !with_code && is(argv[i], "withcode") {
            with_code = true;
            i += 1;
            continue;
        }
        if pattern.is_none() && is(argv[i], "libraryname") {
            if i >= argv.len() - 1 {
                return Err(Reply::err("ERR library name argument was not given"));
            }
            pattern = Some(argv[i + 1]);
            i += 2;
            continue;
        }
        return Err(err(format!(
            "Unknown argument {}",
            String::from_utf8_lossy(super::c_str(argv[i]))
        )));
    }
    with_engine(ctx, |engine, ctx| {
        let mut out = Vec::new();
        for (name, code) in ctx.core.functions.iter() {
            if let Some(p) = pattern {
                if !crate::glob::matches(p, name, true) {
                    continue;
                }
            }
            let functions = engine
                .library_functions(name)
                .map(|f| {
                    let flags = SCRIPT_FLAG_NAMES
                        .iter()
                        .filter(|(_, has)| has(&f.flags))
                        .map(|(n, _)| Reply::simple(n))
                        .collect();
                    Reply::Map(vec![
                        (Reply::bulk(b"name"), Reply::Bulk(f.name.clone())),
                        (
                            Reply::bulk(b"description"),
                            f.description.clone().map_or(Reply::Null, Reply::Bulk),
                        ),
                        (Reply::bulk(b"flags"), Reply::Set(flags)),
                    ])
                })
                .collect();
            let mut fields = vec![
                (Reply::bulk(b"library_name"), Reply::Bulk(name.clone())),
                (Reply::bulk(b"engine"), Reply::bulk(ENGINE_NAME.as_bytes())),
                (Reply::bulk(b"functions"), Reply::Array(functions)),
            ];
            if with_code {
                fields.push((Reply::bulk(b"library_code"), Reply::Bulk(code.clone())));
            }
            out.push(Reply::Map(fields));
        }
        Ok(Reply::Array(out))
    })
}

fn function_stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let running = match ctx.core.script_run.current() {
        Some((None, _, _)) => return Err(Reply::err(BUSY_EVAL_ERR)),
        Some((Some(name), argv, start_ms)) => Reply::Map(vec![
            (Reply::bulk(b"name"), Reply::Bulk(name.as_bytes().to_vec())),
            (
                Reply::bulk(b"command"),
                Reply::Array(argv.iter().cloned().map(Reply::Bulk).collect()),
            ),
            (
                Reply::bulk(b"duration_ms"),
                Reply::Int(crate::clock::now_ms() - start_ms),
            ),
        ]),
        None => Reply::Null,
    };
    let libraries = ctx.core.functions.len() as i64;
    let functions = ctx.core.functions.function_count() as i64;
    Ok(Reply::Map(vec![
        (Reply::bulk(b"running_script"), running),
        (
            Reply::bulk(b"engines"),
            Reply::Map(vec![(
                Reply::bulk(ENGINE_NAME.as_bytes()),
                Reply::Map(vec![
                    (Reply::bulk(b"libraries_count"), Reply::Int(libraries)),
                    (Reply::bulk(b"functions_count"), Reply::Int(functions)),
                ]),
            )]),
        ),
    ]))
}

/// FUNCTION DUMP's payload: every library as a FUNCTION2 record, then
/// the RDB version and the CRC-64, as DUMP frames a value.
pub fn dump_payload(encoder: &writer::Encoder, codes: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        encoder.put_function(&mut out, code);
    }
    out.extend_from_slice(&crate::rdb::WRITE_VERSION.to_le_bytes());
    let crc = crate::rdb::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn function_dump(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let encoder = ctx.core.rdb_encoder();
    Ok(Reply::Bulk(dump_payload(
        &encoder,
        &ctx.core.functions.codes(),
    )))
}

/// The library sources of a FUNCTION RESTORE payload whose footer is
/// good, or Redis's error text.
fn payload_codes(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let body = &payload[..payload.len() - 10];
    let mut codes = Vec::new();
    let mut pos = 0;
    while payload.len() - pos > 10 {
        let kind = body[pos];
        pos += 1;
        if kind == opcode::FUNCTION_PRE_GA {
            return Err("Pre-GA function format not supported".into());
        }
        if kind != opcode::FUNCTION2 {
            return Err("given type is not a function".into());
        }
        let (code, used) = reader::decode_string(&body[pos..])
            .map_err(|_| "Failed loading library payload".to_string())?;
        pos += used;
        codes.push(code);
    }
    Ok(codes)
}

fn function_restore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() > 4 {
        return Err(subcommand_syntax_error(argv));
    }
    let policy =
        match argv.get(3) {
            None => RestorePolicy::Append,
            Some(p) if is(p, "append") => RestorePolicy::Append,
            Some(p) if is(p, "replace") => RestorePolicy::Replace,
            Some(p) if is(p, "flush") => RestorePolicy::Flush,
            Some(_) => return Err(Reply::err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    if super::dump::verify_payload(argv[2], ctx.core.debug.skip_checksum_validation).is_none() {
        return Err(Reply::err("ERR DUMP payload version or checksum are wrong"));
    }
    let codes = payload_codes(argv[2]).map_err(err)?;
    let merged = with_engine(ctx, |engine, ctx| {
        functions::restore(&ctx.core.functions, engine, &codes, policy).map_err(err)
    })?;
    ctx.core.functions.replace_all(merged);
    FunctionEngine::sync(&mut ctx.core.function_engine, &mut ctx.core.functions)
        .map_err(|e| Reply::error(format!("ERR {e}")))?;
    ctx.dirty(1);
    Ok(Reply::ok())
}
