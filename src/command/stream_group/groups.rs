//! XGROUP and XINFO (Redis 7.0 `t_stream.c`'s `xgroupCommand` and
//! `xinfoCommand`): creating, moving and destroying groups, creating and
//! deleting consumers, and describing a stream, its groups and their
//! consumers. Delivery and the pending entries lists (XREADGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM) are in the parent module, with the
//! helpers both use.
//!
//! XGROUP is logged as received; XINFO changes nothing.

use super::{c_str, error_from, group_lag, id_reply, is_opt, touch_consumer};
use crate::command::server::help_reply;
use crate::command::stream::{entry_reply, parse_id, parse_strict_id};
use crate::command::{parse_int, CmdResult, Ctx, NO_SUCH_KEY_ERR};
use crate::core::notify::STREAM;
use crate::reply::Reply;
use crate::types::stream::{ConsumerGroup, Stream, StreamId, ENTRIES_READ_INVALID};
use crate::types::{Blob, Value};

// ---------------------------------------------------------------------------
// Errors and HELP replies of the container commands.

/// `-NOGROUP No such consumer group '<group>' for key name '<key>'`.
fn no_such_group_for_key(group: &[u8], key: &[u8]) -> Reply {
    error_from(&[
        b"NOGROUP No such consumer group '",
        c_str(group),
        b"' for key name '",
        c_str(key),
        b"'",
    ])
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax_error(argv: &[&[u8]]) -> Reply {
    let sub = c_str(argv[1]);
    let sub = &sub[..sub.len().min(128)];
    let cmd = c_str(argv[0]).to_ascii_uppercase();
    error_from(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        sub,
        b"'. Try ",
        &cmd,
        b" HELP.",
    ])
}

// ---------------------------------------------------------------------------
// XGROUP

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

/// XGROUP CREATE / SETID / DESTROY / CREATECONSUMER / DELCONSUMER / HELP,
/// parsed in Redis's order (options, key, group, then the subcommand).
pub(super) fn xgroup(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = argv[1];
    let argc = argv.len();
    if argc < 4 {
        if argc == 2 && is_opt(sub, "HELP") {
            return Ok(help_reply(argv, XGROUP_HELP));
        }
        return Err(subcommand_syntax_error(argv));
    }
    let is_create = is_opt(sub, "CREATE");
    let is_setid = is_opt(sub, "SETID");
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < argc {
        if is_create && is_opt(argv[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if (is_create || is_setid) && is_opt(argv[i], "ENTRIESREAD") && i + 1 < argc {
            entries_read = parse_int(argv[i + 1])?;
            if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
                return Err(Reply::err(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax_error(argv));
        }
    }
    let key = argv[2];
    let group_name = argv[3];
    let exists = ctx.write_stream(key)?.is_some();
    if !mkstream {
        let Some(s) = ctx.write_stream(key)? else {
            return Err(Reply::err(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you \
                 may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        };
        let needs_group = is_setid || is_opt(sub, "CREATECONSUMER") || is_opt(sub, "DELCONSUMER");
        if needs_group && !s.groups.contains_key(group_name) {
            return Err(no_such_group_for_key(group_name, key));
        }
    }
    let now = ctx.now_ms;
    if is_create && (5..=8).contains(&argc) {
        let id = if c_str(argv[4]) == b"$" {
            match ctx.write_stream(key)? {
                Some(s) => s.last_id,
                None => StreamId::MIN,
            }
        } else {
            parse_strict_id(argv[4], 0)?
        };
        if !exists {
            ctx.set_key(key, Value::Stream(Box::default()), false);
        }
        let s = ctx
            .write_stream(key)?
            .expect("the stream exists or was just created by MKSTREAM");
        if s.groups.contains_key(group_name) {
            return Err(Reply::err("BUSYGROUP Consumer Group name already exists"));
        }
        s.groups.insert(
            Blob::new(group_name),
            ConsumerGroup {
                last_id: id,
                entries_read,
                ..ConsumerGroup::default()
            },
        );
        ctx.dirty(1);
        ctx.notify(STREAM, "xgroup-create", key);
        return Ok(Reply::ok());
    }
    if is_setid && (argc == 5 || argc == 7) {
        let last_id = ctx
            .write_stream(key)?
            .map(|s| s.last_id)
            .unwrap_or_default();
        let id = if c_str(argv[4]) == b"$" {
            last_id
        } else {
            parse_id(argv[4], 0)?
        };
        let s = ctx
            .write_stream(key)?
            .expect("checked above: the key exists");
        let group = s
            .groups
            .get_mut(group_name)
            .expect("checked above: the group exists");
        group.last_id = id;
        group.entries_read = entries_read;
        ctx.dirty(1);
        ctx.notify(STREAM, "xgroup-setid", key);
        return Ok(Reply::ok());
    }
    if is_opt(sub, "DESTROY") && argc == 4 {
        let s = ctx
            .write_stream(key)?
            .expect("checked above: the key exists");
        if s.groups.remove(group_name).is_none() {
            return Ok(Reply::Int(0));
        }
        ctx.dirty(1);
        ctx.notify(STREAM, "xgroup-destroy", key);
        // Wakes clients blocked in XREADGROUP on this group: they fail
        // with NOGROUP (Redis's signalKeyAsReady, which is not a
        // modification for WATCH).
        let db = ctx.db_index();
        ctx.core.clients.mark_ready(db, key);
        return Ok(Reply::Int(1));
    }
    if is_opt(sub, "CREATECONSUMER") && argc == 5 {
        let s = ctx
            .write_stream(key)?
            .expect("checked above: the key exists");
        let group = s
            .groups
            .get_mut(group_name)
            .expect("checked above: the group exists");
        if group.consumers.contains_key(argv[4]) {
            return Ok(Reply::Int(0));
        }
        touch_consumer(group, argv[4], now);
        ctx.dirty(1);
        ctx.notify(STREAM, "xgroup-createconsumer", key);
        return Ok(Reply::Int(1));
    }
    if is_opt(sub, "DELCONSUMER") && argc == 5 {
        let s = ctx
            .write_stream(key)?
            .expect("checked above: the key exists");
        let group = s
            .groups
            .get_mut(group_name)
            .expect("checked above: the group exists");
        let Some(consumer) = group.consumers.remove(argv[4]) else {
            return Ok(Reply::Int(0));
        };
        for id in &consumer.pel {
            group.pel.remove(id);
        }
        ctx.dirty(1);
        ctx.notify(STREAM, "xgroup-delconsumer", key);
        return Ok(Reply::Int(consumer.pel.len() as i64));
    }
    Err(subcommand_syntax_error(argv))
}

// ---------------------------------------------------------------------------
// XINFO

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// A bulk reply from a static field name.
fn name(s: &'static str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// XINFO STREAM / GROUPS / CONSUMERS / HELP.
pub(super) fn xinfo(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let sub = argv[1];
    if is_opt(sub, "HELP") {
        if argv.len() != 2 {
            return Err(subcommand_syntax_error(argv));
        }
        return Ok(help_reply(argv, XINFO_HELP));
    }
    if argv.len() < 3 {
        return Err(subcommand_syntax_error(argv));
    }
    let key = argv[2];
    let now = ctx.now_ms;
    let Some(s) = ctx.read_stream(key)? else {
        return Err(Reply::err(NO_SUCH_KEY_ERR));
    };
    if is_opt(sub, "CONSUMERS") && argv.len() == 4 {
        let Some(group) = s.groups.get(argv[3]) else {
            return Err(no_such_group_for_key(argv[3], key));
        };
        let consumers = group
            .consumers
            .iter()
            .map(|(cname, c)| {
                Reply::Map(vec![
                    (name("name"), Reply::bulk(cname)),
                    (name("pending"), Reply::Int(c.pel.len() as i64)),
                    (
                        name("idle"),
                        Reply::Int(now.saturating_sub(c.seen_time_ms).max(0)),
                    ),
                ])
            })
            .collect();
        return Ok(Reply::Array(consumers));
    }
    if is_opt(sub, "GROUPS") && argv.len() == 3 {
        let groups = s
            .groups
            .iter()
            .map(|(gname, g)| {
                Reply::Map(vec![
                    (name("name"), Reply::bulk(gname)),
                    (name("consumers"), Reply::Int(g.consumers.len() as i64)),
                    (name("pending"), Reply::Int(g.pel.len() as i64)),
                    (name("last-delivered-id"), id_reply(g.last_id)),
                    (name("entries-read"), entries_read_reply(g)),
                    (name("lag"), lag_reply(s, g)),
                ])
            })
            .collect();
        return Ok(Reply::Array(groups));
    }
    if is_opt(sub, "STREAM") {
        return stream_info(s, argv);
    }
    Err(subcommand_syntax_error(argv))
}

fn entries_read_reply(group: &ConsumerGroup) -> Reply {
    if group.entries_read == ENTRIES_READ_INVALID {
        Reply::Null
    } else {
        Reply::Int(group.entries_read)
    }
}

fn lag_reply(s: &Stream, group: &ConsumerGroup) -> Reply {
    group_lag(s, group).map_or(Reply::Null, Reply::Int)
}

/// XINFO STREAM key [FULL [COUNT n]] (`xinfoReplyWithStreamInfo`).
fn stream_info(s: &Stream, argv: &[&[u8]]) -> CmdResult {
    let options = &argv[3..];
    let mut full = false;
    let mut count: i64 = 10;
    if !options.is_empty() {
        if options.len() != 1 && options.len() != 3 {
            return Err(subcommand_syntax_error(argv));
        }
        if !is_opt(options[0], "full") {
            return Err(subcommand_syntax_error(argv));
        }
        if options.len() == 3 {
            if !is_opt(options[1], "count") {
                return Err(subcommand_syntax_error(argv));
            }
            count = parse_int(options[2])?;
            if count < 0 {
                count = 10;
            }
        }
        full = true;
    }
    let keys = s.node_count();
    let mut fields = vec![
        (name("length"), Reply::Int(s.len() as i64)),
        (name("radix-tree-keys"), Reply::Int(keys as i64)),
        (name("radix-tree-nodes"), Reply::Int(s.radix_tree_nodes())),
        (name("last-generated-id"), id_reply(s.last_id)),
        (
            name("max-deleted-entry-id"),
            id_reply(s.max_deleted_entry_id),
        ),
        (name("entries-added"), Reply::Int(s.entries_added as i64)),
        (name("recorded-first-entry-id"), id_reply(s.first_id)),
    ];
    if !full {
        fields.push((name("groups"), Reply::Int(s.groups.len() as i64)));
        let first = s.first().map_or(Reply::Null, |(id, f)| entry_reply(id, f));
        let last = s.last().map_or(Reply::Null, |(id, f)| entry_reply(id, f));
        fields.push((name("first-entry"), first));
        fields.push((name("last-entry"), last));
        return Ok(Reply::Map(fields));
    }
    // COUNT 0 means everything.
    let limit = if count == 0 {
        usize::MAX
    } else {
        usize::try_from(count).unwrap_or(usize::MAX)
    };
    let entries = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .map(|(id, f)| entry_reply(id, f))
        .collect();
    fields.push((name("entries"), Reply::Array(entries)));
    let groups = s
        .groups
        .iter()
        .map(|(gname, g)| {
            let pending = g
                .pel
                .iter()
                .take(limit)
                .map(|(id, nack)| {
                    Reply::Array(vec![
                        id_reply(*id),
                        Reply::bulk(&nack.consumer),
                        Reply::Int(nack.delivery_time_ms),
                        Reply::Int(nack.delivery_count as i64),
                    ])
                })
                .collect();
            let consumers = g
                .consumers
                .iter()
                .map(|(cname, c)| {
                    let pending = c
                        .pel
                        .iter()
                        .take(limit)
                        .map(|id| {
                            let nack = &g.pel[id];
                            Reply::Array(vec![
                                id_reply(*id),
                                Reply::Int(nack.delivery_time_ms),
                                Reply::Int(nack.delivery_count as i64),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        (name("name"), Reply::bulk(cname)),
                        (name("seen-time"), Reply::Int(c.seen_time_ms)),
                        (name("pel-count"), Reply::Int(c.pel.len() as i64)),
                        (name("pending"), Reply::Array(pending)),
                    ])
                })
                .collect();
            Reply::Map(vec![
                (name("name"), Reply::bulk(gname)),
                (name("last-delivered-id"), id_reply(g.last_id)),
                (name("entries-read"), entries_read_reply(g)),
                (name("lag"), lag_reply(s, g)),
                (name("pel-count"), Reply::Int(g.pel.len() as i64)),
                (name("pending"), Reply::Array(pending)),
                (name("consumers"), Reply::Array(consumers)),
            ])
        })
        .collect();
    fields.push((name("groups"), Reply::Array(groups)));
    Ok(Reply::Map(fields))
}
