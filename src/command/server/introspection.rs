//! COMMAND and its subcommands (COUNT, LIST, INFO, DOCS, GETKEYS, …): the
//! table described from the generated metadata in `docs`.

use super::{help_reply, subcommands_of, COMMAND_SUBCOMMANDS};
use crate::command::docs::{self, BeginSearch, Doc, FindKeys};
use crate::command::getkeys::{keys_of_spec, KeysError};
use crate::command::{flags::*, is, CmdResult, CommandSpec, Ctx};
use crate::config::{CommandName, CommandRenames};
use crate::reply::Reply;

const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

pub(super) fn command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 1 {
        return Ok(Reply::Array(
            sorted_commands(&ctx.core.config.command_renames)
                .map(|spec| command_info_reply(spec, None))
                .collect(),
        ));
    }
    let Some(sub) = COMMAND_SUBCOMMANDS.iter().find(|s| is(argv[1], s.name)) else {
        return Err(crate::command::unknown_subcommand_error("command", argv[1]));
    };
    if !sub.arity_ok(argv.len()) {
        return Err(crate::command::arity_error(&format!(
            "command|{}",
            sub.name
        )));
    }
    (sub.handler)(ctx, argv)
}

/// The top-level commands clients can reach (rename-command may have
/// disabled some), by name (Redis's order is its hash table's, which
/// differs from run to run: any fixed order is as good).
fn sorted_commands(renames: &CommandRenames) -> impl Iterator<Item = &'static CommandSpec> {
    let mut all: Vec<&'static CommandSpec> = crate::command::table()
        .values()
        .copied()
        .filter(|spec| renames.is_empty() || renames.reachable(spec.name))
        .collect();
    all.sort_by_key(|s| s.name);
    all.into_iter()
}

/// The top-level command a client reaches by `name`, rename-command
/// applied (Redis looks names up in its renamed table).
fn lookup_renamed(renames: &CommandRenames, name: &[u8]) -> Option<&'static CommandSpec> {
    match renames.resolve(name) {
        CommandName::Unchanged => crate::command::lookup(name),
        CommandName::Renamed(real) => crate::command::lookup(real.as_bytes()),
        CommandName::Removed => None,
    }
}

/// A command or subcommand by full name (`get`, `config|get`), as Redis's
/// `lookupCommandBySds` finds it (under its rename-command name, if
/// any). Returns the spec and its parent's name.
fn lookup_full_name(
    renames: &CommandRenames,
    name: &[u8],
) -> Option<(&'static CommandSpec, Option<&'static str>)> {
    let mut parts = name.split(|&b| b == b'|');
    let first = parts.next()?;
    let base = lookup_renamed(renames, first)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some((base, None)),
        (Some(sub), None) => {
            let spec = subcommands_of(base)
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))?;
            Some((spec, Some(base.name)))
        }
        _ => None,
    }
}

fn full_name(spec: &CommandSpec, parent: Option<&str>) -> String {
    match parent {
        Some(p) => format!("{p}|{}", spec.name),
        None => spec.name.to_string(),
    }
}

/// COMMAND INFO's flags, in Redis's order.
fn command_flags_reply(spec: &CommandSpec, doc: Option<&Doc>) -> Reply {
    let extra = doc.map_or(0, |d| d.extra_flags);
    let names: [(bool, &'static str); 20] = [
        (spec.has(WRITE), "write"),
        (spec.has(READONLY), "readonly"),
        (spec.has(DENYOOM), "denyoom"),
        (spec.has(ADMIN), "admin"),
        (spec.has(PUBSUB), "pubsub"),
        (spec.has(NOSCRIPT), "noscript"),
        (spec.has(BLOCKING), "blocking"),
        (spec.has(LOADING), "loading"),
        (spec.has(STALE), "stale"),
        (spec.has(SKIP_MONITOR), "skip_monitor"),
        (spec.has(SKIP_SLOWLOG), "skip_slowlog"),
        (extra & docs::EXTRA_ASKING != 0, "asking"),
        (spec.has(FAST), "fast"),
        (spec.has(NO_AUTH), "no_auth"),
        (
            extra & docs::EXTRA_NO_MANDATORY_KEYS != 0,
            "no_mandatory_keys",
        ),
        (
            extra & docs::EXTRA_NO_ASYNC_LOADING != 0,
            "no_async_loading",
        ),
        (spec.has(NO_MULTI), "no_multi"),
        (spec.has(MOVABLE_KEYS), "movablekeys"),
        (spec.has(ALLOW_BUSY), "allow_busy"),
        (false, "module"),
    ];
    Reply::Set(
        names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| Reply::simple(n))
            .collect(),
    )
}

/// ACL categories: the documented ones plus those implied by the flags
/// (Redis's `setImplicitACLCategories`).
fn acl_categories(spec: &CommandSpec, doc: Option<&Doc>) -> u32 {
    let bit = |name: &str| {
        1u32 << docs::ACL_NAMES
            .iter()
            .position(|n| *n == name)
            .expect("known ACL category")
    };
    let mut acl = doc.map_or(0, |d| d.acl);
    if spec.has(WRITE) {
        acl |= bit("write");
    }
    if spec.has(READONLY) && acl & bit("scripting") == 0 {
        acl |= bit("read");
    }
    if spec.has(ADMIN) {
        acl |= bit("admin") | bit("dangerous");
    }
    if spec.has(PUBSUB) {
        acl |= bit("pubsub");
    }
    if spec.has(FAST) {
        acl |= bit("fast");
    }
    if spec.has(BLOCKING) {
        acl |= bit("blocking");
    }
    if acl & bit("fast") == 0 {
        acl |= bit("slow");
    }
    acl
}

fn bulk_str(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn key_flags_reply(flags: u16) -> Reply {
    Reply::Set(
        docs::KEY_FLAG_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| flags & (1 << i) != 0)
            .map(|(_, n)| Reply::simple(n))
            .collect(),
    )
}

fn key_specs_reply(doc: Option<&Doc>) -> Reply {
    let specs = doc.map_or(&[][..], |d| d.key_specs);
    Reply::Set(
        specs
            .iter()
            .map(|ks| {
                let mut map = Vec::with_capacity(4);
                if !ks.notes.is_empty() {
                    map.push((bulk_str("notes"), bulk_str(ks.notes)));
                }
                map.push((bulk_str("flags"), key_flags_reply(ks.flags)));
                let begin = match ks.begin {
                    BeginSearch::Unknown => ("unknown", Vec::new()),
                    BeginSearch::Index(pos) => (
                        "index",
                        vec![(bulk_str("index"), Reply::Int(i64::from(pos)))],
                    ),
                    BeginSearch::Keyword(word, from) => (
                        "keyword",
                        vec![
                            (bulk_str("keyword"), bulk_str(word)),
                            (bulk_str("startfrom"), Reply::Int(i64::from(from))),
                        ],
                    ),
                };
                map.push((
                    bulk_str("begin_search"),
                    Reply::Map(vec![
                        (bulk_str("type"), bulk_str(begin.0)),
                        (bulk_str("spec"), Reply::Map(begin.1)),
                    ]),
                ));
                let find = match ks.find {
                    FindKeys::Unknown => ("unknown", Vec::new()),
                    FindKeys::Range {
                        lastkey,
                        keystep,
                        limit,
                    } => (
                        "range",
                        vec![
                            (bulk_str("lastkey"), Reply::Int(i64::from(lastkey))),
                            (bulk_str("keystep"), Reply::Int(i64::from(keystep))),
                            (bulk_str("limit"), Reply::Int(i64::from(limit))),
                        ],
                    ),
                    FindKeys::Keynum {
                        keynumidx,
                        firstkey,
                        keystep,
                    } => (
                        "keynum",
                        vec![
                            (bulk_str("keynumidx"), Reply::Int(i64::from(keynumidx))),
                            (bulk_str("firstkey"), Reply::Int(i64::from(firstkey))),
                            (bulk_str("keystep"), Reply::Int(i64::from(keystep))),
                        ],
                    ),
                };
                map.push((
                    bulk_str("find_keys"),
                    Reply::Map(vec![
                        (bulk_str("type"), bulk_str(find.0)),
                        (bulk_str("spec"), Reply::Map(find.1)),
                    ]),
                ));
                Reply::Map(map)
            })
            .collect(),
    )
}

/// One command's COMMAND INFO entry (Redis's `addReplyCommandInfo`).
fn command_info_reply(spec: &CommandSpec, parent: Option<&str>) -> Reply {
    let name = full_name(spec, parent);
    let doc = docs::lookup(&name);
    let acl = acl_categories(spec, doc);
    let categories = docs::ACL_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| acl & (1 << i) != 0)
        .map(|(_, n)| Reply::Simple(format!("@{n}").into()))
        .collect();
    let tips = doc
        .map_or(&[][..], |d| d.tips)
        .iter()
        .map(|t| bulk_str(t))
        .collect();
    let subs = subcommands_of(spec);
    let subcommands = if subs.is_empty() {
        Reply::Set(Vec::new())
    } else {
        Reply::Array(
            subs.iter()
                .map(|s| command_info_reply(s, Some(spec.name)))
                .collect(),
        )
    };
    Reply::Array(vec![
        Reply::Bulk(name.into_bytes()),
        Reply::Int(i64::from(spec.arity)),
        command_flags_reply(spec, doc),
        Reply::Int(i64::from(spec.first_key)),
        Reply::Int(i64::from(spec.last_key)),
        Reply::Int(i64::from(spec.key_step)),
        Reply::Set(categories),
        Reply::Set(tips),
        key_specs_reply(doc),
        subcommands,
    ])
}

fn args_reply(args: &[docs::Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|a| {
                let mut map = vec![
                    (bulk_str("name"), bulk_str(a.name)),
                    (bulk_str("type"), bulk_str(a.kind)),
                ];
                if a.key_spec_index >= 0 {
                    map.push((
                        bulk_str("key_spec_index"),
                        Reply::Int(i64::from(a.key_spec_index)),
                    ));
                }
                if !a.token.is_empty() || a.flags & docs::ARG_EMPTY_TOKEN != 0 {
                    map.push((bulk_str("token"), bulk_str(a.token)));
                }
                if !a.since.is_empty() {
                    map.push((bulk_str("since"), bulk_str(a.since)));
                }
                if !a.deprecated_since.is_empty() {
                    map.push((bulk_str("deprecated_since"), bulk_str(a.deprecated_since)));
                }
                if a.flags & !docs::ARG_EMPTY_TOKEN != 0 {
                    let flags = docs::ARG_FLAG_NAMES
                        .iter()
                        .filter(|(bit, _)| a.flags & bit != 0)
                        .map(|(_, n)| Reply::simple(n))
                        .collect();
                    map.push((bulk_str("flags"), Reply::Set(flags)));
                }
                if a.kind == "oneof" || a.kind == "block" {
                    map.push((bulk_str("arguments"), args_reply(a.args)));
                }
                Reply::Map(map)
            })
            .collect(),
    )
}

/// One command's COMMAND DOCS entry (Redis's `addReplyCommandDocs`).
fn command_docs_reply(spec: &CommandSpec, parent: Option<&str>) -> Reply {
    let name = full_name(spec, parent);
    let mut map = Vec::new();
    let group = match docs::lookup(&name) {
        Some(doc) => {
            if !doc.summary.is_empty() {
                map.push((bulk_str("summary"), bulk_str(doc.summary)));
            }
            if !doc.since.is_empty() {
                map.push((bulk_str("since"), bulk_str(doc.since)));
            }
            map.push((bulk_str("group"), bulk_str(doc.group)));
            if !doc.complexity.is_empty() {
                map.push((bulk_str("complexity"), bulk_str(doc.complexity)));
            }
            if doc.doc_flags != 0 {
                let mut flags = Vec::new();
                if doc.doc_flags & docs::DOC_DEPRECATED != 0 {
                    flags.push(Reply::simple("deprecated"));
                }
                if doc.doc_flags & docs::DOC_SYSCMD != 0 {
                    flags.push(Reply::simple("syscmd"));
                }
                map.push((bulk_str("doc_flags"), Reply::Set(flags)));
            }
            if !doc.deprecated_since.is_empty() {
                map.push((bulk_str("deprecated_since"), bulk_str(doc.deprecated_since)));
            }
            if !doc.replaced_by.is_empty() {
                map.push((bulk_str("replaced_by"), bulk_str(doc.replaced_by)));
            }
            if !doc.history.is_empty() {
                let history = doc
                    .history
                    .iter()
                    .map(|(v, what)| Reply::Array(vec![bulk_str(v), bulk_str(what)]))
                    .collect();
                map.push((bulk_str("history"), Reply::Set(history)));
            }
            if !doc.args.is_empty() {
                map.push((bulk_str("arguments"), args_reply(doc.args)));
            }
            None
        }
        None => Some(spec.group),
    };
    if let Some(group) = group {
        map.push((bulk_str("group"), bulk_str(group)));
    }
    let subs = subcommands_of(spec);
    if !subs.is_empty() {
        let entries = subs
            .iter()
            .map(|s| {
                (
                    Reply::Bulk(full_name(s, Some(spec.name)).into_bytes()),
                    command_docs_reply(s, Some(spec.name)),
                )
            })
            .collect();
        map.push((bulk_str("subcommands"), Reply::Map(entries)));
    }
    Reply::Map(map)
}

pub(super) fn command_count(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        sorted_commands(&ctx.core.config.command_renames).count() as i64,
    ))
}

pub(super) fn command_help(_ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(help_reply(argv, COMMAND_HELP))
}

pub(super) fn command_info(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let renames = &ctx.core.config.command_renames;
    if argv.len() == 2 {
        return Ok(Reply::Array(
            sorted_commands(renames)
                .map(|spec| command_info_reply(spec, None))
                .collect(),
        ));
    }
    Ok(Reply::Array(
        argv[2..]
            .iter()
            .map(|name| match lookup_full_name(renames, name) {
                Some((spec, parent)) => command_info_reply(spec, parent),
                None => Reply::Null,
            })
            .collect(),
    ))
}

pub(super) fn command_docs(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let renames = &ctx.core.config.command_renames;
    let entries: Vec<(Reply, Reply)> = if argv.len() == 2 {
        sorted_commands(renames)
            .map(|spec| (bulk_str(spec.name), command_docs_reply(spec, None)))
            .collect()
    } else {
        argv[2..]
            .iter()
            .filter_map(|name| lookup_full_name(renames, name))
            .map(|(spec, parent)| {
                (
                    Reply::Bulk(full_name(spec, parent).into_bytes()),
                    command_docs_reply(spec, parent),
                )
            })
            .collect()
    };
    Ok(Reply::Map(entries))
}

pub(super) fn command_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    enum Filter<'a> {
        All,
        Module,
        AclCat(Option<usize>),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::All;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(argv[i], "filterby") && more == 2 {
            let arg = argv[i + 2];
            filter = if is(argv[i + 1], "module") {
                Filter::Module
            } else if is(argv[i + 1], "aclcat") {
                Filter::AclCat(
                    docs::ACL_NAMES
                        .iter()
                        .position(|n| n.as_bytes().eq_ignore_ascii_case(arg)),
                )
            } else if is(argv[i + 1], "pattern") {
                Filter::Pattern(arg)
            } else {
                return crate::command::syntax_error();
            };
            i += 3;
        } else {
            return crate::command::syntax_error();
        }
    }
    let mut names = Vec::new();
    let mut consider = |spec: &CommandSpec, parent: Option<&str>| {
        let name = full_name(spec, parent);
        let keep = match &filter {
            Filter::All => true,
            Filter::Module => false,
            Filter::AclCat(None) => false,
            Filter::AclCat(Some(cat)) => {
                acl_categories(spec, docs::lookup(&name)) & (1 << cat) != 0
            }
            Filter::Pattern(p) => crate::glob::matches(p, name.as_bytes(), true),
        };
        if keep {
            names.push(Reply::Bulk(name.into_bytes()));
        }
    };
    for spec in sorted_commands(&ctx.core.config.command_renames) {
        consider(spec, None);
        for sub in subcommands_of(spec) {
            consider(sub, Some(spec.name));
        }
    }
    Ok(Reply::Array(names))
}

fn getkeys(renames: &CommandRenames, argv: &[&[u8]], with_flags: bool) -> CmdResult {
    let cmd_argv = &argv[2..];
    let base = lookup_renamed(renames, cmd_argv[0]);
    let found = base.and_then(|base| {
        let subs = subcommands_of(base);
        if subs.is_empty() || cmd_argv.len() < 2 {
            Some((base, None))
        } else {
            subs.iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(cmd_argv[1]))
                .map(|s| (s, Some(base.name)))
        }
    });
    let Some((spec, parent)) = found else {
        return Err(KeysError::UnknownCommand.reply());
    };
    let keys = keys_of_spec(spec, &full_name(spec, parent), cmd_argv).map_err(KeysError::reply)?;
    Ok(Reply::Array(
        keys.iter()
            .map(|&(pos, flags)| {
                let key = Reply::bulk(cmd_argv[pos]);
                if with_flags {
                    Reply::Array(vec![key, key_flags_reply(flags)])
                } else {
                    key
                }
            })
            .collect(),
    ))
}

pub(super) fn command_getkeys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    getkeys(&ctx.core.config.command_renames, argv, false)
}

pub(super) fn command_getkeysandflags(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    getkeys(&ctx.core.config.command_renames, argv, true)
}
