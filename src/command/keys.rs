//! Generic key commands (Redis's "generic" group, plus the keyspace-wide
//! DBSIZE / FLUSHDB / FLUSHALL / SWAPDB of the "server" group): DEL UNLINK
//! EXISTS TYPE, the EXPIRE and TTL families, PERSIST, RENAME(NX), KEYS,
//! SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, MOVE, COPY, TOUCH and
//! OBJECT.
//!
//! Also the SCAN argument parsers shared with HSCAN / SSCAN / ZSCAN
//! ([`parse_scan_options`], [`parse_scan_cursor`]).
//!
//! Logged effects (see [`Ctx::log`]): the EXPIRE family logs `PEXPIREAT`
//! with the absolute time in ms (or `DEL` when the time is already past);
//! FLUSHDB / FLUSHALL are logged even when nothing was removed (Redis
//! forces their propagation); everything else is logged as received, like
//! Redis. RENAME, MOVE and COPY carry the absolute expiry with the value, so
//! their replay is deterministic as long as the loader does not expire keys
//! while loading (Redis's loader does not).
//!
//! Known differences from Redis 7.0.15:
//! - OBJECT REFCOUNT reports Redis's shared-integer count (2147483647) for
//!   every string whose encoding is `int` with a value in 0..=9999, and 1
//!   otherwise; Redis reports 1 for a COPY of such a string (COPY duplicates
//!   the shared object), which a value without object identity cannot tell.
//! - SCAN cursors are those of our hash table, so the keys returned per call
//!   differ from Redis's; a full iteration returns the same keys.

use super::c_str;
use super::{
    error_text, parse_int, syntax_error, CmdResult, CommandSpec, Ctx, NOT_INT_ERR, NO_SUCH_KEY_ERR,
};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::{Blob, Value};

const GENERIC: &str = "generic";
const SERVER: &str = "server";

/// A command of `group`: arity, flags and key positions from the
/// generated metadata ([`super::docs`]).
const fn spec(name: &'static str, group: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, group, handler)
}

/// The generic family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("del", GENERIC, del),
    spec("unlink", GENERIC, del),
    spec("exists", GENERIC, exists),
    spec("type", GENERIC, type_command),
    spec("expire", GENERIC, expire),
    spec("pexpire", GENERIC, pexpire),
    spec("expireat", GENERIC, expireat),
    spec("pexpireat", GENERIC, pexpireat),
    spec("ttl", GENERIC, ttl),
    spec("pttl", GENERIC, pttl),
    spec("expiretime", GENERIC, expiretime),
    spec("pexpiretime", GENERIC, pexpiretime),
    spec("persist", GENERIC, persist),
    spec("rename", GENERIC, rename),
    spec("renamenx", GENERIC, renamenx),
    spec("keys", GENERIC, keys),
    // Their lazy-expiry DELs are propagated bare (see the flag).
    spec("scan", GENERIC, scan).with_extra_flags(super::flags::TOUCHES_ARBITRARY_KEYS),
    spec("randomkey", GENERIC, randomkey).with_extra_flags(super::flags::TOUCHES_ARBITRARY_KEYS),
    spec("dbsize", SERVER, dbsize),
    spec("flushdb", SERVER, flushdb),
    spec("flushall", SERVER, flushall),
    spec("swapdb", SERVER, swapdb),
    spec("move", GENERIC, move_command),
    spec("copy", GENERIC, copy),
    spec("touch", GENERIC, touch),
    spec("object", GENERIC, super::container_handler).with_subcommands(OBJECT_SUBCOMMANDS),
];

static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::from_docs("encoding", "object|encoding", GENERIC, object_encoding),
    CommandSpec::from_docs("freq", "object|freq", GENERIC, object_freq),
    CommandSpec::from_docs("help", "object|help", GENERIC, object_help),
    CommandSpec::from_docs("idletime", "object|idletime", GENERIC, object_idletime),
    CommandSpec::from_docs("refcount", "object|refcount", GENERIC, object_refcount),
];

// ---------------------------------------------------------------------------
// Helpers.

/// Redis's option comparison (`strcasecmp` on the argument's C string).
fn is_opt(arg: &[u8], word: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// Redis's `getIntFromObjectOrReply`: a 64-bit integer that must also fit
/// in a C `int`. `custom_err` replaces both default messages (not an
/// integer; out of the `int` range) when given.
fn parse_c_int(arg: &[u8], custom_err: Option<&'static str>) -> Result<i64, Reply> {
    let Some(n) = crate::types::num::parse_i64(arg) else {
        return Err(Reply::err(custom_err.unwrap_or(NOT_INT_ERR)));
    };
    if i32::try_from(n).is_err() {
        return Err(Reply::err(custom_err.unwrap_or(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        )));
    }
    Ok(n)
}

/// A database index as MOVE and COPY … DB take it (`selectDb`'s range).
fn parse_db_index(ctx: &Ctx, arg: &[u8]) -> Result<usize, Reply> {
    let index = parse_c_int(arg, None)?;
    if index < 0 || index as usize >= ctx.core.keyspace.db_count() {
        return Err(Reply::err("ERR DB index is out of range"));
    }
    Ok(index as usize)
}

const SAME_OBJECT_ERR: &str = "ERR source and destination objects are the same";

// ---------------------------------------------------------------------------
// DEL UNLINK EXISTS TYPE TOUCH

/// DEL and UNLINK (freeing is never deferred here, so they are the same).
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

fn exists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let count = argv[1..]
        .iter()
        .filter(|key| ctx.lookup_read_notouch(key, true).is_some())
        .count();
    Ok(Reply::Int(count as i64))
}

fn touch(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // EXISTS that refreshes the access clock (or LFU counter).
    let count = argv[1..]
        .iter()
        .filter(|key| ctx.lookup_read(key).is_some())
        .count();
    Ok(Reply::Int(count as i64))
}

fn type_command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let name = ctx
        .lookup_read_notouch(argv[1], true)
        .map_or("none", Value::type_name);
    Ok(Reply::simple(name))
}

// ---------------------------------------------------------------------------
// EXPIRE PEXPIRE EXPIREAT PEXPIREAT

/// Conditions of the EXPIRE family.
#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(argv: &[&[u8]]) -> Result<ExpireFlags, Reply> {
    let mut flags = ExpireFlags::default();
    for arg in &argv[3..] {
        if is_opt(arg, "nx") {
            flags.nx = true;
        } else if is_opt(arg, "xx") {
            flags.xx = true;
        } else if is_opt(arg, "gt") {
            flags.gt = true;
        } else if is_opt(arg, "lt") {
            flags.lt = true;
        } else {
            let mut msg = b"ERR Unsupported option ".to_vec();
            msg.extend_from_slice(c_str(arg));
            return Err(Reply::error(error_text(&msg)));
        }
    }
    if flags.nx && (flags.xx || flags.gt || flags.lt) {
        return Err(Reply::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags.gt && flags.lt {
        return Err(Reply::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(flags)
}

/// The EXPIRE family. `relative` adds the command time; `seconds` scales
/// the argument; `name` is the command's name for the overflow error.
fn expire_generic(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    relative: bool,
    seconds: bool,
    name: &str,
) -> CmdResult {
    let flags = parse_expire_flags(argv)?;
    let mut when_ms = parse_int(argv[2])?;
    let overflow = || Reply::error(format!("ERR invalid expire time in '{name}' command"));
    if seconds {
        when_ms = when_ms.checked_mul(1000).ok_or_else(overflow)?;
    }
    if relative {
        // Redis only checks the upper bound here (a negative base cannot
        // occur: the clock is after 1970).
        let base_ms = ctx.now_ms;
        if when_ms > i64::MAX - base_ms {
            return Err(overflow());
        }
        when_ms += base_ms;
    }
    let key = argv[1];
    if ctx.lookup_write(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let current_ms = ctx.expire_at(key);
    if flags.nx && current_ms.is_some() {
        return Ok(Reply::Int(0));
    }
    if flags.xx && current_ms.is_none() {
        return Ok(Reply::Int(0));
    }
    // No TTL counts as an infinite one: GT never beats it, LT always does.
    if flags.gt && current_ms.is_none_or(|current| when_ms <= current) {
        return Ok(Reply::Int(0));
    }
    if flags.lt && current_ms.is_some_and(|current| when_ms >= current) {
        return Ok(Reply::Int(0));
    }
    ctx.dirty(1);
    if ctx.already_expired(when_ms) {
        // Already expired: delete now and log it as the DEL it amounts to.
        ctx.db().remove(key);
        ctx.signal_modified(key);
        ctx.notify(notify::GENERIC, "del", key);
        ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
        return Ok(Reply::Int(1));
    }
    ctx.set_expire(key, when_ms);
    ctx.notify(notify::GENERIC, "expire", key);
    // Redis rewrites the command name (unless it is PEXPIREAT) and the time
    // (unless PEXPIREAT gave it), keeping any NX/XX/GT/LT arguments.
    if relative || seconds {
        let mut logged: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
        logged[0] = b"PEXPIREAT".to_vec();
        logged[2] = when_ms.to_string().into_bytes();
        ctx.log(logged);
    }
    Ok(Reply::Int(1))
}

fn expire(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, true, true, "expire")
}

fn pexpire(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, true, false, "pexpire")
}

fn expireat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, false, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, argv, false, false, "pexpireat")
}

// ---------------------------------------------------------------------------
// TTL PTTL EXPIRETIME PEXPIRETIME PERSIST

/// The TTL family: `millis` picks the unit, `absolute` the Unix time
/// instead of the remaining time. Seconds are rounded to nearest.
fn ttl_generic(ctx: &mut Ctx, key: &[u8], millis: bool, absolute: bool) -> CmdResult {
    if ctx.lookup_read_notouch(key, true).is_none() {
        return Ok(Reply::Int(-2));
    }
    let Some(at_ms) = ctx.expire_at(key) else {
        return Ok(Reply::Int(-1));
    };
    let value_ms = if absolute {
        at_ms
    } else {
        at_ms.saturating_sub(ctx.now_ms)
    }
    .max(0);
    if millis {
        return Ok(Reply::Int(value_ms));
    }
    // Rounded in unsigned arithmetic, as Redis's compiled code effectively
    // does (an expiry near i64::MAX gives 9223372036854776, not a negative).
    Ok(Reply::Int(((value_ms as u64 + 500) / 1000) as i64))
}

fn ttl(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv[1], false, false)
}

fn pttl(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv[1], true, false)
}

fn expiretime(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, argv[1], true, true)
}

fn persist(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    if ctx.lookup_write(key).is_none() || !ctx.remove_expire(key) {
        return Ok(Reply::Int(0));
    }
    ctx.signal_modified(key);
    ctx.notify(notify::GENERIC, "persist", key);
    ctx.dirty(1);
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------
// RENAME RENAMENX MOVE COPY

fn rename_generic(ctx: &mut Ctx, argv: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (argv[1], argv[2]);
    if ctx.lookup_write(src).is_none() {
        return Err(Reply::err(NO_SUCH_KEY_ERR));
    }
    let done = if nx { Reply::Int(1) } else { Reply::ok() };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { done });
    }
    let expire_ms = ctx.expire_at(src);
    if ctx.lookup_write(dst).is_some() {
        if nx {
            return Ok(Reply::Int(0));
        }
        ctx.db().remove(dst);
    }
    let value = ctx
        .db()
        .remove(src)
        .expect("source key checked present above");
    ctx.db().set(dst, value, false);
    ctx.notify_new(dst);
    if let Some(at_ms) = expire_ms {
        ctx.set_expire(dst, at_ms);
    }
    ctx.signal_modified(src);
    ctx.signal_modified(dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    ctx.dirty(1);
    Ok(done)
}

fn rename(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, argv, false)
}

fn renamenx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, argv, true)
}

fn move_command(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let src = ctx.db_index();
    let dst = parse_db_index(ctx, argv[2])?;
    if src == dst {
        return Err(Reply::err(SAME_OBJECT_ERR));
    }
    if ctx.lookup_write(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let expire_ms = ctx.expire_at(key);
    // An expired key in the target database is deleted (and logged there).
    ctx.expire_if_needed_in(dst, key);
    if ctx.core.keyspace.db(dst).contains(key) {
        return Ok(Reply::Int(0));
    }
    let (from, to) = ctx.core.keyspace.two_dbs_mut(src, dst);
    let value = from.remove(key).expect("moved key checked present above");
    to.insert_new(key, value);
    if let Some(at_ms) = expire_ms {
        to.set_expire(key, at_ms);
        ctx.core.note_expire_set(ctx.session.is_master, dst, key);
    }
    ctx.core.notify(notify::NEW, "new", dst, key);
    ctx.core.signal_modified(src, key);
    ctx.core.signal_modified(dst, key);
    ctx.core.notify(notify::GENERIC, "move_from", src, key);
    ctx.core.notify(notify::GENERIC, "move_to", dst, key);
    ctx.dirty(1);
    Ok(Reply::Int(1))
}

fn copy(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let src_db = ctx.db_index();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        if is_opt(argv[j], "replace") {
            replace = true;
        } else if is_opt(argv[j], "db") && j + 1 < argv.len() {
            dst_db = parse_db_index(ctx, argv[j + 1])?;
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let (key, new_key) = (argv[1], argv[2]);
    if src_db == dst_db && key == new_key {
        return Err(Reply::err(SAME_OBJECT_ERR));
    }
    let Some(value) = ctx.lookup_read(key).cloned() else {
        return Ok(Reply::Int(0));
    };
    let expire_ms = ctx.expire_at(key);
    ctx.expire_if_needed_in(dst_db, new_key);
    let target = ctx.core.keyspace.db_mut(dst_db);
    if target.contains(new_key) {
        if !replace {
            return Ok(Reply::Int(0));
        }
        target.remove(new_key);
    }
    target.insert_new(new_key, value);
    if let Some(at_ms) = expire_ms {
        target.set_expire(new_key, at_ms);
        ctx.core
            .note_expire_set(ctx.session.is_master, dst_db, new_key);
    }
    ctx.core.notify(notify::NEW, "new", dst_db, new_key);
    ctx.core.signal_modified(dst_db, new_key);
    ctx.core.notify(notify::GENERIC, "copy_to", dst_db, new_key);
    ctx.dirty(1);
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------
// KEYS SCAN RANDOMKEY DBSIZE

fn keys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let pattern = argv[1];
    let all = pattern == b"*";
    let now_ms = ctx.now_ms;
    let db = ctx.db();
    // Expired keys are skipped, not deleted (as Redis's KEYS does).
    let found: Vec<Reply> = db
        .iter()
        .filter(|(key, _)| all || crate::glob::matches(pattern, key, false))
        .filter(|(key, _)| !db.is_expired(key, now_ms))
        .map(|(key, _)| Reply::bulk(key))
        .collect();
    Ok(Reply::Array(found))
}

fn scan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor = parse_scan_cursor(argv[1])?;
    let options = parse_scan_options(argv, 2)?;
    let main = ctx.db().main();
    let (cursor, batch) = scan_table(cursor, options.count, 1, |cursor, batch: &mut Vec<Blob>| {
        main.scan_step(cursor, |key, _| batch.push(key.clone()))
    });
    let mut found = Vec::with_capacity(batch.len());
    for key in batch {
        if !options.matches(&key) {
            continue;
        }
        if options.type_name.is_some() {
            // Redis looks the key up (counting a hit or miss, expiring it):
            // an expired key has type "none".
            let type_name = ctx.lookup_read(&key).map_or("none", Value::type_name);
            if !options.type_matches(type_name) {
                continue;
            }
        }
        if ctx.expire_if_needed(&key)
            || ctx
                .core
                .hidden_expired(ctx.session.is_master, ctx.session.db, &key, ctx.now_ms)
        {
            continue;
        }
        found.push(Reply::Bulk(key.into_vec()));
    }
    Ok(scan_reply(cursor, found))
}

fn randomkey(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    loop {
        let index = ctx.db_index();
        let core = &mut *ctx.core;
        let Some(key) = core.keyspace.db(index).random_key(&mut core.rng).cloned() else {
            return Ok(Reply::Null);
        };
        // An expired key is deleted and another one drawn.
        if !ctx.expire_if_needed(&key) {
            return Ok(Reply::Bulk(key.into_vec()));
        }
    }
}

fn dbsize(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(ctx.db().len() as i64))
}

// ---------------------------------------------------------------------------
// FLUSHDB FLUSHALL SWAPDB

/// The optional SYNC / ASYNC argument (freeing is never deferred here, so
/// both mean the same).
fn parse_flush_mode(argv: &[&[u8]]) -> Result<(), Reply> {
    match argv.len() {
        1 => Ok(()),
        2 if is_opt(argv[1], "sync") || is_opt(argv[1], "async") => Ok(()),
        _ => syntax_error(),
    }
}

/// Empties database `index`, signalling every key; returns the number of
/// keys removed.
fn flush_db(ctx: &mut Ctx, index: usize) -> u64 {
    let core = &mut *ctx.core;
    // Taken out so its keys can be signalled without copying them.
    let flushed = std::mem::take(core.keyspace.db_mut(index));
    // Client-side caching was told of the flush as a whole.
    core.tracking.set_muted(true);
    for (key, _) in flushed.iter() {
        core.signal_modified(index, key);
    }
    core.tracking.set_muted(false);
    flushed.len() as u64
}

fn flushdb(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    parse_flush_mode(argv)?;
    let removed = flush_db(ctx, ctx.db_index());
    ctx.core.tracking_flush();
    ctx.dirty(removed);
    // Logged even when the database was already empty (Redis forces it).
    ctx.log(argv.iter().map(|a| a.to_vec()).collect());
    Ok(Reply::ok())
}

fn flushall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    parse_flush_mode(argv)?;
    // Redis stops a running BGSAVE (it would save what was just deleted)
    // and, with save points configured, saves the empty dataset at once.
    let core = &mut *ctx.core;
    core.save.abort(&mut core.keyspace);
    // A replication capture too, as Redis kills its RDB child: its
    // replicas are closed and sync again.
    core.abort_repl_sync();
    let mut removed = 0;
    for index in 0..ctx.core.keyspace.db_count() {
        removed += flush_db(ctx, index);
    }
    ctx.core.tracking_flush();
    ctx.core.forget_replica_expires();
    ctx.dirty(removed);
    ctx.log(argv.iter().map(|a| a.to_vec()).collect());
    if !ctx.core.config.save.is_empty() && !ctx.core.loading {
        let dirty = ctx.core.dirty;
        // A failed save is recorded (INFO, stop-writes-on-bgsave-error);
        // FLUSHALL itself succeeded either way.
        let _ = ctx.core.save_now(ctx.now_ms);
        // The flush itself is still a change to log (Redis keeps it dirty).
        ctx.core.dirty = dirty;
    }
    Ok(Reply::ok())
}

fn swapdb(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let first = parse_c_int(argv[1], Some("ERR invalid first DB index"))?;
    let second = parse_c_int(argv[2], Some("ERR invalid second DB index"))?;
    let count = ctx.core.keyspace.db_count() as i64;
    if !(0..count).contains(&first) || !(0..count).contains(&second) {
        return Err(Reply::err("ERR DB index is out of range"));
    }
    let (a, b) = (first as usize, second as usize);
    if a != b {
        let now = ctx.now_ms;
        let core = &mut *ctx.core;
        let (first, second) = core.keyspace.two_dbs_mut(a, b);
        first.swap(second);
        // WATCHes and blocked clients see each database's new contents
        // (Redis's touchAllWatchedKeysInDb and scanDatabaseForReadyKeys).
        for (db, other) in [(a, b), (b, a)] {
            // `other` now holds what `db` held before.
            let before: Vec<Vec<u8>> = core
                .clients
                .watched_keys_in(db)
                .into_iter()
                .filter(|key| core.keyspace.db(other).get(key).is_some())
                .map(|key| key.to_vec())
                .collect();
            core.signal_db_replaced(db, |key| before.iter().any(|k| k == key), now);
            // Redis's scanDatabaseForDeletedStreams: a key that was a
            // stream and is none now wakes its blocked XREADGROUPs (they
            // answer that the key no longer exists).
            let is_stream = |d: usize, key: &[u8]| {
                matches!(
                    core.keyspace.db(d).get(key),
                    Some(crate::types::Value::Stream(_))
                )
            };
            for key in core.clients.blocked_keys_in(db) {
                if is_stream(other, &key) && !is_stream(db, &key) {
                    core.clients.mark_ready(db, &key);
                }
            }
        }
    }
    ctx.dirty(1);
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------
// OBJECT

/// Redis shares the integers 0..=9999 between all string values that hold
/// them, unless `maxmemory` is set with an LRU/LFU policy (each key then
/// needs its own access clock).
const SHARED_INTEGERS: i64 = 10_000;

/// OBJECT's key lookup: counts a hit or miss, leaves the access clock; a
/// missing key is a null bulk.
fn object_lookup<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<&'c Value, Reply> {
    ctx.lookup_read_notouch(key, false).ok_or(Reply::Null)
}

fn object_encoding(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let value = object_lookup(ctx, argv[2])?;
    Ok(Reply::bulk(value.encoding().as_bytes()))
}

fn object_refcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let no_sharing = ctx.core.config.maxmemory != 0 && ctx.core.policy().tracks_access();
    let value = object_lookup(ctx, argv[2])?;
    let shared = !no_sharing
        && match value {
            Value::Str(s) if value.encoding() == "int" => {
                crate::types::num::parse_i64(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n))
            }
            _ => false,
        };
    Ok(Reply::Int(if shared { i64::from(i32::MAX) } else { 1 }))
}

/// True when the maxmemory policy is an LFU one (OBJECT FREQ is then
/// available and OBJECT IDLETIME is not, as in Redis).
fn lfu_policy_selected(ctx: &Ctx) -> bool {
    ctx.core.policy().is_lfu()
}

/// The access field of `key` in the selected database (present: OBJECT
/// looked it up).
fn access_of(ctx: &mut Ctx, key: &[u8]) -> u32 {
    ctx.db().access(key).unwrap_or(0)
}

fn object_idletime(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    object_lookup(ctx, argv[2])?;
    if lfu_policy_selected(ctx) {
        return Err(Reply::err(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let stored = access_of(ctx, argv[2]);
    Ok(Reply::Int(ctx.core.idle_seconds(stored, ctx.now_ms) as i64))
}

fn object_freq(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    object_lookup(ctx, argv[2])?;
    if !lfu_policy_selected(ctx) {
        return Err(Reply::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let stored = access_of(ctx, argv[2]);
    Ok(Reply::Int(i64::from(
        ctx.core.frequency(stored, ctx.now_ms),
    )))
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

fn object_help(_ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Array(
        OBJECT_HELP.iter().map(|line| Reply::simple(line)).collect(),
    ))
}
// ---------------------------------------------------------------------------
// SCAN argument parsing, shared with HSCAN / SSCAN / ZSCAN.

/// Options of SCAN and the *SCAN commands, borrowed from the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions<'a> {
    /// The MATCH pattern; `None` when absent or exactly `*` (which Redis
    /// treats as "no filter", so it also returns the empty key).
    pub pattern: Option<&'a [u8]>,
    /// COUNT (default 10, at least 1).
    pub count: u64,
    /// TYPE (SCAN only), as given (compared case-insensitively).
    pub type_name: Option<&'a [u8]>,
}

impl ScanOptions<'_> {
    /// True when `element` passes the MATCH filter.
    pub fn matches(&self, element: &[u8]) -> bool {
        match self.pattern {
            None => true,
            Some(pattern) => crate::glob::matches(pattern, element, false),
        }
    }

    /// True when a value whose TYPE is `type_name` passes the TYPE filter.
    pub fn type_matches(&self, type_name: &str) -> bool {
        match self.type_name {
            None => true,
            Some(wanted) => c_str(wanted).eq_ignore_ascii_case(type_name.as_bytes()),
        }
    }
}

/// Parses the options of SCAN (`from` = 2) or HSCAN/SSCAN/ZSCAN (`from` =
/// 3, after the key and the cursor): MATCH, COUNT (`ERR value is not an
/// integer or out of range`, or `ERR syntax error` when below 1) and, only
/// when `from` is 2 as in Redis (which accepts TYPE only when scanning the
/// keyspace), TYPE. Anything else is `ERR syntax error`; later options
/// override earlier ones.
pub fn parse_scan_options<'a>(argv: &[&'a [u8]], from: usize) -> Result<ScanOptions<'a>, Reply> {
    let mut options = ScanOptions {
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = from;
    while i < argv.len() {
        let has_value = argv.len() - i >= 2;
        if has_value && is_opt(argv[i], "count") {
            let count = parse_int(argv[i + 1])?;
            if count < 1 {
                return syntax_error();
            }
            options.count = count as u64;
        } else if has_value && is_opt(argv[i], "match") {
            let pattern = argv[i + 1];
            options.pattern = if pattern == b"*" { None } else { Some(pattern) };
        } else if has_value && from == 2 && is_opt(argv[i], "type") {
            options.type_name = Some(argv[i + 1]);
        } else {
            return syntax_error();
        }
        i += 2;
    }
    Ok(options)
}

/// Parses a SCAN cursor like Redis's `strtoul`-based parser: optional `+`
/// or `-` (a negative cursor wraps around, as `strtoul` does), decimal
/// digits, and nothing else up to the end or a NUL byte (C strings stop
/// there); an empty argument is cursor 0. Leading whitespace, junk and
/// values beyond 64 bits are `ERR invalid cursor`.
pub fn parse_scan_cursor(arg: &[u8]) -> Result<u64, Reply> {
    const INVALID: &str = "ERR invalid cursor";
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    let text = &arg[..end];
    if text.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match text[0] {
        b'+' => (false, &text[1..]),
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Reply::err(INVALID));
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
            .ok_or(Reply::err(INVALID))?;
    }
    Ok(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// The bucket walk SCAN, HSCAN, SSCAN and ZSCAN share (Redis's
/// `scanGenericCommand`): calls `step` (one `dictScan` call, pushing what
/// the bucket holds) until the cursor wraps to 0, `count` elements are
/// collected, or the budget of ten steps per requested reply entry runs out,
/// so a sparse table cannot stall the server. `replies_per_element` is 2 for
/// HSCAN and ZSCAN, whose COUNT Redis doubles because each element is a
/// field or member and a value or score (which doubles the budget too).
/// Elements are collected before MATCH / TYPE filtering, as in Redis.
pub fn scan_table<T>(
    mut cursor: u64,
    count: u64,
    replies_per_element: u64,
    mut step: impl FnMut(u64, &mut Vec<T>) -> u64,
) -> (u64, Vec<T>) {
    let wanted = count.saturating_mul(replies_per_element);
    let mut budget = wanted.saturating_mul(10);
    let mut found = Vec::new();
    loop {
        cursor = step(cursor, &mut found);
        if cursor == 0
            || budget == 0
            || (found.len() as u64).saturating_mul(replies_per_element) >= wanted
        {
            break;
        }
        budget -= 1;
    }
    (cursor, found)
}

/// The reply of every *SCAN command: the next cursor, which Redis prints
/// as a signed 64-bit number, and the elements.
pub fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    let mut text = Vec::with_capacity(20);
    crate::types::num::write_i64(&mut text, cursor as i64);
    Reply::Array(vec![Reply::Bulk(text), Reply::Array(items)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::test_support::{engine, run};
    use crate::Effect;

    fn effect(db: usize, line: &str) -> Effect {
        Effect {
            db,
            argv: line.split(' ').map(|a| a.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn scan_cursor_follows_strtoul() {
        assert_eq!(parse_scan_cursor(b"0"), Ok(0));
        assert_eq!(parse_scan_cursor(b""), Ok(0));
        assert_eq!(parse_scan_cursor(b"+12"), Ok(12));
        assert_eq!(parse_scan_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(parse_scan_cursor(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_scan_cursor(b"7\0junk"), Ok(7));
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"-",
            b"+",
            b"0x1",
            b"abc",
        ] {
            assert_eq!(
                parse_scan_cursor(bad),
                Err(Reply::err("ERR invalid cursor")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn scan_options_parse_like_redis() {
        let argv: Vec<&[u8]> = vec![
            b"SCAN", b"0", b"MATCH", b"a*", b"count", b"5", b"TYPE", b"hash",
        ];
        let options = parse_scan_options(&argv, 2).expect("valid options");
        assert_eq!(options.pattern, Some(&b"a*"[..]));
        assert_eq!(options.count, 5);
        assert!(options.type_matches("hash") && !options.type_matches("set"));
        // TYPE is SCAN-only; COUNT below 1 and dangling options are syntax errors.
        let argv: Vec<&[u8]> = vec![b"HSCAN", b"k", b"0", b"TYPE", b"hash"];
        assert_eq!(parse_scan_options(&argv, 3), Err(Reply::err(SYNTAX)));
        let argv: Vec<&[u8]> = vec![b"SCAN", b"0", b"COUNT", b"0"];
        assert_eq!(parse_scan_options(&argv, 2), Err(Reply::err(SYNTAX)));
        let argv: Vec<&[u8]> = vec![b"SCAN", b"0", b"COUNT", b"x"];
        assert_eq!(parse_scan_options(&argv, 2), Err(Reply::err(NOT_INT_ERR)));
        let argv: Vec<&[u8]> = vec![b"SCAN", b"0", b"MATCH"];
        assert_eq!(parse_scan_options(&argv, 2), Err(Reply::err(SYNTAX)));
        // MATCH * is no filter at all (it even passes the empty key).
        let argv: Vec<&[u8]> = vec![b"SCAN", b"0", b"MATCH", b"*"];
        let options = parse_scan_options(&argv, 2).expect("valid options");
        assert!(options.pattern.is_none() && options.matches(b""));
    }

    const SYNTAX: &str = super::super::SYNTAX_ERR;

    #[test]
    fn relative_expiry_is_logged_as_absolute_pexpireat() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET k v");
        e.take_effects();
        let before = crate::engine::now_ms();
        assert_eq!(run(&mut e, &mut s, "EXPIRE k 100 GT"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "EXPIRE k 100"), Reply::Int(1));
        assert_eq!(run(&mut e, &mut s, "pexpire k 200000 gt"), Reply::Int(1));
        let after = crate::engine::now_ms();
        let effects = e.take_effects();
        assert_eq!(effects.len(), 2);
        for (effect, (delta_ms, rest)) in effects
            .iter()
            .zip([(100_000, &[][..]), (200_000, &[&b"gt"[..]][..])])
        {
            assert_eq!(effect.db, 0);
            assert_eq!(effect.argv[0], b"PEXPIREAT");
            assert_eq!(effect.argv[1], b"k");
            let at: i64 = std::str::from_utf8(&effect.argv[2])
                .unwrap()
                .parse()
                .unwrap();
            assert!(at >= before + delta_ms && at <= after + delta_ms);
            assert_eq!(&effect.argv[3..], rest);
        }
        assert_eq!(run(&mut e, &mut s, "EXPIREAT k 4000000000"), Reply::Int(1));
        assert_eq!(
            e.take_effects(),
            vec![effect(0, "PEXPIREAT k 4000000000000")]
        );
        assert_eq!(
            run(&mut e, &mut s, "pexpireat k 4000000000001 XX"),
            Reply::Int(1)
        );
        assert_eq!(
            e.take_effects(),
            vec![effect(0, "pexpireat k 4000000000001 XX")]
        );
        assert_eq!(
            run(&mut e, &mut s, "EXPIRETIME k"),
            Reply::Int(4_000_000_000)
        );
        assert_eq!(
            run(&mut e, &mut s, "PEXPIRETIME k"),
            Reply::Int(4_000_000_000_001)
        );
    }

    #[test]
    fn expiry_in_the_past_deletes_and_logs_del() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET k v");
        e.take_effects();
        assert_eq!(run(&mut e, &mut s, "EXPIRE k -1"), Reply::Int(1));
        assert_eq!(e.take_effects(), vec![effect(0, "DEL k")]);
        assert_eq!(run(&mut e, &mut s, "EXISTS k"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "EXPIRE k 10"), Reply::Int(0));
        assert!(e.take_effects().is_empty());
        assert_eq!(
            run(&mut e, &mut s, "EXPIRE k 9223372036854776"),
            Reply::err("ERR invalid expire time in 'expire' command")
        );
        assert_eq!(
            run(&mut e, &mut s, "PEXPIRE k 9223372036854775807"),
            Reply::err("ERR invalid expire time in 'pexpire' command")
        );
    }

    #[test]
    fn lazily_expired_key_is_logged_as_del_before_the_command() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET a 1");
        run(&mut e, &mut s, "SET b 1");
        let past = crate::engine::now_ms() + 30;
        run(&mut e, &mut s, &format!("PEXPIREAT b {past}"));
        e.take_effects();
        std::thread::sleep(std::time::Duration::from_millis(40));
        assert_eq!(run(&mut e, &mut s, "RENAME a b"), Reply::ok());
        assert_eq!(
            e.take_effects(),
            vec![effect(0, "DEL b"), effect(0, "RENAME a b")]
        );
        // An expired key in the target database of MOVE is deleted there.
        run(&mut e, &mut s, "SELECT 1");
        run(&mut e, &mut s, "SET b 1");
        let soon = crate::engine::now_ms() + 30;
        run(&mut e, &mut s, &format!("PEXPIREAT b {soon}"));
        run(&mut e, &mut s, "SELECT 0");
        e.take_effects();
        std::thread::sleep(std::time::Duration::from_millis(40));
        assert_eq!(run(&mut e, &mut s, "MOVE b 1"), Reply::Int(1));
        assert_eq!(
            e.take_effects(),
            vec![effect(1, "DEL b"), effect(0, "MOVE b 1")]
        );
    }

    #[test]
    fn rename_keeps_ttl_and_move_copy_log_in_the_source_db() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET a v");
        run(&mut e, &mut s, "PEXPIREAT a 4000000000000");
        assert_eq!(run(&mut e, &mut s, "RENAME a b"), Reply::ok());
        assert_eq!(
            run(&mut e, &mut s, "PEXPIRETIME b"),
            Reply::Int(4_000_000_000_000)
        );
        e.take_effects();
        run(&mut e, &mut s, "SELECT 2");
        run(&mut e, &mut s, "SET m v");
        assert_eq!(run(&mut e, &mut s, "MOVE m 3"), Reply::Int(1));
        assert_eq!(run(&mut e, &mut s, "MOVE m 3"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "COPY x y DB 4"), Reply::Int(0));
        run(&mut e, &mut s, "SELECT 3");
        assert_eq!(run(&mut e, &mut s, "COPY m m DB 4 REPLACE"), Reply::Int(1));
        assert_eq!(
            e.take_effects(),
            vec![
                effect(2, "SET m v"),
                effect(2, "MOVE m 3"),
                effect(3, "COPY m m DB 4 REPLACE")
            ]
        );
        run(&mut e, &mut s, "SELECT 0");
        assert_eq!(run(&mut e, &mut s, "COPY b c DB 5"), Reply::Int(1));
        run(&mut e, &mut s, "SELECT 5");
        assert_eq!(
            run(&mut e, &mut s, "PEXPIRETIME c"),
            Reply::Int(4_000_000_000_000)
        );
    }

    #[test]
    fn flushes_are_always_logged_and_noops_never() {
        let (mut e, mut s) = engine();
        assert_eq!(run(&mut e, &mut s, "FLUSHALL"), Reply::ok());
        assert_eq!(run(&mut e, &mut s, "flushdb async"), Reply::ok());
        assert_eq!(run(&mut e, &mut s, "FLUSHDB now"), Reply::err(SYNTAX));
        assert_eq!(run(&mut e, &mut s, "DEL nothing"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "PERSIST nothing"), Reply::Int(0));
        assert_eq!(
            run(&mut e, &mut s, "RENAMENX x y"),
            Reply::err("ERR no such key")
        );
        assert_eq!(
            e.take_effects(),
            vec![effect(0, "FLUSHALL"), effect(0, "flushdb async")]
        );
        run(&mut e, &mut s, "SET k 1");
        run(&mut e, &mut s, "SWAPDB 0 1");
        assert_eq!(run(&mut e, &mut s, "DBSIZE"), Reply::Int(0));
        assert_eq!(
            e.take_effects(),
            vec![effect(0, "SET k 1"), effect(0, "SWAPDB 0 1")]
        );
    }

    #[test]
    fn object_subcommands() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET n 5");
        run(&mut e, &mut s, "SET big 10000");
        run(&mut e, &mut s, "SET s hello");
        assert_eq!(
            run(&mut e, &mut s, "OBJECT REFCOUNT n"),
            Reply::Int(2147483647)
        );
        assert_eq!(run(&mut e, &mut s, "OBJECT REFCOUNT big"), Reply::Int(1));
        assert_eq!(
            run(&mut e, &mut s, "OBJECT ENCODING s"),
            Reply::bulk(b"embstr")
        );
        assert_eq!(run(&mut e, &mut s, "OBJECT ENCODING none"), Reply::Null);
        assert_eq!(run(&mut e, &mut s, "OBJECT IDLETIME s"), Reply::Int(0));
        assert!(run(&mut e, &mut s, "OBJECT FREQ s").is_error());
        assert_eq!(run(&mut e, &mut s, "OBJECT FREQ none"), Reply::Null);
        match run(&mut e, &mut s, "OBJECT HELP") {
            Reply::Array(lines) => assert_eq!(lines.len(), 15),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn scan_returns_every_key_once_without_writes() {
        let (mut e, mut s) = engine();
        for i in 0..2000 {
            run(&mut e, &mut s, &format!("SET key:{i} v"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = b"0".to_vec();
        loop {
            let argv: Vec<&[u8]> = vec![b"SCAN", &cursor, b"COUNT", b"7", b"MATCH", b"key:1*"];
            let Reply::Array(parts) = e.execute(&mut s, &argv) else {
                panic!("SCAN replies an array")
            };
            let [Reply::Bulk(next), Reply::Array(keys)] = &parts[..] else {
                panic!("SCAN replies [cursor, keys]")
            };
            for key in keys {
                let Reply::Bulk(key) = key else {
                    panic!("keys are bulks")
                };
                assert!(seen.insert(key.clone()), "key returned twice");
            }
            cursor = next.clone();
            if cursor == b"0" {
                break;
            }
        }
        assert_eq!(seen.len(), 1111);
    }
}
