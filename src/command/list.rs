//! List commands: pushes, pops (single, counted, multi-key), ranges,
//! positional access, LINSERT/LREM/LTRIM/LPOS, moves between lists, and
//! the blocking pops and moves (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH).
//!
//! Argument errors, reply shapes and logged effects follow Redis 7.0.15's
//! `t_list.c` and `blocked.c`. The blocking commands serve a client
//! through the same pop and move primitives ([`pop_one`], [`pop_many`],
//! [`move_element`]) as the plain ones, so the keyspace changes are the
//! same, and log what Redis propagates for them ([`pop_effect`],
//! [`move_effect`]): never the blocking command itself.

use super::clients::{BlockKind, BlockRequest};
use super::{is, parse_int, syntax_error, CmdResult, CommandSpec, Ctx, NO_SUCH_KEY_ERR};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::list::End;
use crate::types::{Blob, List, Value};

/// A list command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "list", handler)
}

/// The list family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("lpush", lpush),
    spec("rpush", rpush),
    spec("lpushx", lpushx),
    spec("rpushx", rpushx),
    spec("lpop", lpop),
    spec("rpop", rpop),
    spec("llen", llen),
    spec("lrange", lrange),
    spec("lindex", lindex),
    spec("lset", lset),
    spec("linsert", linsert),
    spec("lrem", lrem),
    spec("ltrim", ltrim),
    spec("lpos", lpos),
    spec("lmove", lmove),
    spec("rpoplpush", rpoplpush),
    spec("lmpop", lmpop),
    spec("blpop", blpop),
    spec("brpop", brpop),
    spec("blmove", blmove),
    spec("brpoplpush", brpoplpush),
    spec("blmpop", blmpop),
];

/// `ERR index out of range` (LSET).
const INDEX_OUT_OF_RANGE_ERR: &str = "ERR index out of range";
/// The message of Redis's `getPositiveLongFromObjectOrReply` without a
/// custom message (LPOP/RPOP count).
const MUST_BE_POSITIVE_ERR: &str = "ERR value is out of range, must be positive";

// ---------------------------------------------------------------------------
// Primitives shared with the blocking commands.

/// Pops one element from the list at `key`, deleting the key when the list
/// becomes empty. `Ok(None)` when the key does not exist; WRONGTYPE when it
/// is not a list.
///
/// Counts one change and signals the key, but logs nothing: LPOP/RPOP are
/// logged as received, a served BLPOP logs [`pop_effect`]`(key, end, None)`.
pub fn pop_one(ctx: &mut Ctx, key: &[u8], end: End) -> Result<Option<Blob>, Reply> {
    let Some((value, now_empty)) = pop_raw(ctx, key, end)? else {
        return Ok(None);
    };
    popped_from(ctx, key, end, now_empty);
    ctx.signal_modified(key);
    ctx.dirty(1);
    Ok(Some(value))
}

/// Pops one element, leaving an emptied list in place: the value and
/// whether the list is now empty.
fn pop_raw(ctx: &mut Ctx, key: &[u8], end: End) -> Result<Option<(Blob, bool)>, Reply> {
    Ok(Some(match ctx.write_list(key)? {
        None => return Ok(None),
        Some(list) => match list.pop(end) {
            Some(value) => (value, list.is_empty()),
            // Only an empty list loaded from an old dump can get here;
            // Redis treats it as missing (LMOVE) rather than crashing.
            None => return Ok(None),
        },
    }))
}

/// After elements were popped from `end` of the list at `key`: the "lpop"
/// or "rpop" event, then the key's deletion ("del") when the list is now
/// empty (Redis's `listElementsRemoved`).
fn popped_from(ctx: &mut Ctx, key: &[u8], end: End, now_empty: bool) {
    ctx.notify(notify::LIST, end_event(end, "lpop", "rpop"), key);
    if now_empty {
        ctx.db().remove(key);
        ctx.notify(notify::GENERIC, "del", key);
    }
}

/// `head` or `tail`, after `end`.
fn end_event(end: End, head: &'static str, tail: &'static str) -> &'static str {
    match end {
        End::Head => head,
        End::Tail => tail,
    }
}

/// Pops up to `count` elements from the list at `key`, nearest `end`
/// first, deleting the key when the list becomes empty. `Ok(None)` when the
/// key does not exist; WRONGTYPE when it is not a list.
///
/// Counts one change per element and signals the key, but logs nothing:
/// the caller logs [`pop_effect`]`(key, end, Some(popped.len()))` where Redis
/// rewrites the command (LMPOP, BLMPOP), or lets LPOP/RPOP be logged as
/// received.
pub fn pop_many(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Blob>>, Reply> {
    let (popped, now_empty) = match ctx.write_list(key)? {
        None => return Ok(None),
        Some(list) => {
            let n = count.min(list.len());
            let mut popped = Vec::with_capacity(n);
            for _ in 0..n {
                popped.push(list.pop(end).expect("n is at most the list length"));
            }
            (popped, list.is_empty())
        }
    };
    if !popped.is_empty() {
        popped_from(ctx, key, end, now_empty);
    } else if now_empty {
        ctx.db().remove(key);
    }
    if !popped.is_empty() {
        ctx.signal_modified(key);
        ctx.dirty(popped.len() as u64);
    }
    Ok(Some(popped))
}

/// The command Redis propagates for a pop from `key`: `LPOP key` /
/// `RPOP key` for a single pop (`count` None), `LPOP key <count>` for a
/// counted one, `count` being the number of elements actually popped.
pub fn pop_effect(key: &[u8], end: End, count: Option<usize>) -> Vec<Vec<u8>> {
    let name: &[u8] = match end {
        End::Head => b"LPOP",
        End::Tail => b"RPOP",
    };
    let mut argv = vec![name.to_vec(), key.to_vec()];
    if let Some(count) = count {
        argv.push(count.to_string().into_bytes());
    }
    argv
}

/// Pops one element from `end_from` of the list at `src` and pushes it at
/// `end_to` of the list at `dst` (created when missing), as LMOVE does;
/// `src == dst` rotates the list. Returns the element, `Ok(None)` when
/// `src` does not exist. WRONGTYPE when either key holds another type, in
/// which case nothing changes.
///
/// Counts one change and signals both keys, but logs nothing: LMOVE and
/// RPOPLPUSH are logged as received, a served BLMOVE logs [`move_effect`].
pub fn move_element(
    ctx: &mut Ctx,
    src: &[u8],
    dst: &[u8],
    end_from: End,
    end_to: End,
) -> Result<Option<Blob>, Reply> {
    match ctx.write_list(src)? {
        Some(list) if !list.is_empty() => {}
        _ => return Ok(None),
    }
    if src == dst {
        let list = ctx
            .write_list(src)?
            .expect("the source list was found just above");
        let value = list.pop(end_from).expect("the source list is not empty");
        list.push(end_to, &value);
        ctx.signal_modified(src);
        ctx.notify(notify::LIST, end_event(end_to, "lpush", "rpush"), dst);
        ctx.notify(notify::LIST, end_event(end_from, "lpop", "rpop"), src);
        ctx.dirty(1);
        return Ok(Some(value));
    }
    // The destination's type is checked before anything is popped, so a
    // WRONGTYPE leaves both keys untouched (as in Redis).
    ctx.write_list(dst)?;
    let Some((value, now_empty)) = pop_raw(ctx, src, end_from)? else {
        return Ok(None);
    };
    // Redis's order: the push (and its event), then the pop's events.
    list_for_push(ctx, dst).push(end_to, &value);
    ctx.signal_modified(dst);
    ctx.notify(notify::LIST, end_event(end_to, "lpush", "rpush"), dst);
    popped_from(ctx, src, end_from, now_empty);
    ctx.signal_modified(src);
    ctx.dirty(1);
    Ok(Some(value))
}

/// The command Redis propagates for a served BLMOVE (`LMOVE src dst
/// <from> <to>`), or for BRPOPLPUSH when `as_rpoplpush` (`RPOPLPUSH src
/// dst`).
pub fn move_effect(
    src: &[u8],
    dst: &[u8],
    end_from: End,
    end_to: End,
    as_rpoplpush: bool,
) -> Vec<Vec<u8>> {
    if as_rpoplpush {
        vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()]
    } else {
        vec![
            b"LMOVE".to_vec(),
            src.to_vec(),
            dst.to_vec(),
            end_from.word().to_vec(),
            end_to.word().to_vec(),
        ]
    }
}

/// The list at `key` for pushing, created empty when missing. The caller
/// has already checked the type (this is the single place a list key comes
/// into existence, where the blocking layer will signal waiting clients).
fn list_for_push<'c>(ctx: &'c mut Ctx, key: &[u8]) -> &'c mut List {
    if !ctx.db().contains(key) {
        ctx.db().insert_new(key, Value::List(Box::default()));
        ctx.notify_new(key);
    }
    match ctx.db().get_mut(key) {
        Some(Value::List(list)) => list,
        _ => panic!("the key was checked to hold a list or just created as one"),
    }
}

// ---------------------------------------------------------------------------
// Argument parsing.

/// `LEFT` / `RIGHT` (case-insensitive); anything else is a syntax error.
fn parse_end(arg: &[u8]) -> Result<End, Reply> {
    if is(arg, "left") {
        Ok(End::Head)
    } else if is(arg, "right") {
        Ok(End::Tail)
    } else {
        syntax_error()
    }
}

/// An integer in `min..=max`. As Redis's `getRangeLongFromObjectOrReply`
/// with a custom message, a non-integer gets the same message as an
/// out-of-range value.
fn parse_int_in(arg: &[u8], min: i64, max: i64, msg: &'static str) -> Result<i64, Reply> {
    match crate::types::num::parse_i64(arg) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Reply::err(msg)),
    }
}

/// The positions `start..=end` a Redis range (negative = from the tail)
/// selects in a list of `len` elements, `None` when it selects nothing.
fn resolve_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

/// The position a Redis index (negative = from the tail) designates, when
/// it is inside a list of `len` elements.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let index = if index < 0 { len + index } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

fn bulk_array(values: Vec<Blob>) -> Reply {
    Reply::Array(
        values
            .into_iter()
            .map(|v| Reply::Bulk(v.into_vec()))
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Handlers.

fn lpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Head, false)
}

fn rpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Tail, false)
}

fn lpushx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Head, true)
}

fn rpushx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    push_generic(ctx, argv, End::Tail, true)
}

/// LPUSH/RPUSH/LPUSHX/RPUSHX `key element [element ...]`.
fn push_generic(ctx: &mut Ctx, argv: &[&[u8]], end: End, only_existing: bool) -> CmdResult {
    let key = argv[1];
    let values = &argv[2..];
    // One keyspace lookup on the hot path (pushing onto an existing list).
    let len = match ctx.write_list(key)? {
        Some(list) => push_all(list, end, values),
        None if only_existing => return Ok(Reply::Int(0)),
        None => push_all(list_for_push(ctx, key), end, values),
    };
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, end_event(end, "lpush", "rpush"), key);
    ctx.dirty(values.len() as u64);
    Ok(Reply::Int(len as i64))
}

/// Pushes `values` in order at `end`; returns the new length.
fn push_all(list: &mut List, end: End, values: &[&[u8]]) -> usize {
    for value in values {
        list.push(end, value);
    }
    list.len()
}

fn lpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, argv, End::Head)
}

fn rpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, argv, End::Tail)
}

/// LPOP/RPOP `key [count]`: a bulk reply without a count, an array with
/// one (even `count` 0), and the matching null when the key is missing.
fn pop_generic(ctx: &mut Ctx, argv: &[&[u8]], end: End) -> CmdResult {
    let key = argv[1];
    match argv.len() {
        2 => Ok(match pop_one(ctx, key, end)? {
            Some(value) => Reply::Bulk(value.into_vec()),
            None => Reply::Null,
        }),
        3 => {
            let count = parse_int_in(argv[2], 0, i64::MAX, MUST_BE_POSITIVE_ERR)?;
            if count == 0 {
                // The key is still looked up: missing is a null array,
                // another type an error, and only then the empty array.
                return Ok(match ctx.write_list(key)? {
                    None => Reply::NullArray,
                    Some(_) => Reply::Array(Vec::new()),
                });
            }
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            Ok(match pop_many(ctx, key, end, count)? {
                Some(values) => bulk_array(values),
                None => Reply::NullArray,
            })
        }
        _ => Err(super::arity_error(if end == End::Head {
            "lpop"
        } else {
            "rpop"
        })),
    }
}

/// The parsed arguments of LMPOP/BLMPOP after the numkeys at `numkeys_at`:
/// `(keys, end, count)`. Checks in Redis's order (numkeys, the LEFT/RIGHT
/// position, then COUNT), so the first failing check picks the error.
fn parse_mpop<'a>(
    argv: &[&'a [u8]],
    numkeys_at: usize,
) -> Result<(Vec<&'a [u8]>, End, usize), Reply> {
    let numkeys = parse_int_in(
        argv[numkeys_at],
        1,
        i64::MAX,
        "ERR numkeys should be greater than 0",
    )?;
    // An index past the arguments (or past usize) means too few of them.
    let end_at = match usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
    {
        Some(i) if i < argv.len() => i,
        _ => return syntax_error(),
    };
    let end = parse_end(argv[end_at])?;
    let mut count: Option<i64> = None;
    let mut j = end_at + 1;
    while j < argv.len() {
        let has_value = j + 1 < argv.len();
        if count.is_none() && is(argv[j], "count") && has_value {
            j += 1;
            count = Some(parse_int_in(
                argv[j],
                1,
                i64::MAX,
                "ERR count should be greater than 0",
            )?);
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok((argv[numkeys_at + 1..end_at].to_vec(), end, count))
}

/// Pops up to `count` elements from the first of `keys` holding a
/// non-empty list, logged as `LPOP/RPOP key <popped>` (what Redis
/// propagates for LMPOP and BLMPOP). The reply is `[key, [elements]]`;
/// `Ok(None)` when no key has elements, WRONGTYPE when a key met before
/// that holds another type.
fn mpop_serve(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    end: End,
    count: usize,
) -> Result<Option<Reply>, Reply> {
    for &key in keys {
        match ctx.write_list(key)? {
            Some(list) if !list.is_empty() => {}
            _ => continue,
        }
        let popped =
            pop_many(ctx, key, end, count)?.expect("the list was found non-empty just above");
        ctx.log(pop_effect(key, end, Some(popped.len())));
        return Ok(Some(Reply::Array(vec![
            Reply::bulk(key),
            bulk_array(popped),
        ])));
    }
    Ok(None)
}

/// LMPOP `numkeys key [key ...] LEFT|RIGHT [COUNT count]`: pops from the
/// first non-empty list, logged as `LPOP/RPOP key <popped>`.
fn lmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(argv, 1)?;
    Ok(mpop_serve(ctx, &keys, end, count)?.unwrap_or(Reply::NullArray))
}

// ---------------------------------------------------------------------------
// Blocking commands.
//
// Each handler first tries to serve the client like its non-blocking
// counterpart and otherwise blocks (see `Ctx::block`). When a key it waits
// on receives a list, the engine runs the handler again with
// `ctx.ready_key()` set: as Redis 7.0 does, it then serves from that key
// alone, or blocks again when another client took the elements first.
// Served commands are logged as Redis propagates them: BLPOP/BRPOP as
// `LPOP/RPOP key`, BLMPOP as `LPOP/RPOP key <popped>`, BLMOVE as `LMOVE`
// and BRPOPLPUSH as `RPOPLPUSH`.

/// The key a retried command may serve from: `None` on a first run (all
/// keys are candidates); on a retry `Some(Some(key))` when the ready key
/// holds a non-empty list, `Some(None)` when it does not (emptied by a
/// client served before, or replaced by another type, which Redis ignores:
/// the client stays blocked).
fn retry_key(ctx: &mut Ctx) -> Option<Option<Blob>> {
    let key = Blob::new(ctx.ready_key()?);
    let ready = matches!(ctx.lookup_write(&key), Some(Value::List(l)) if !l.is_empty());
    Some(ready.then_some(key))
}

/// Blocks on `keys` for a list, answering `timeout_reply` on timeout.
fn block_on_lists(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    deadline_ms: Option<i64>,
    timeout_reply: Reply,
) -> CmdResult {
    ctx.block(BlockRequest {
        keys: keys.iter().map(|k| Blob::new(k)).collect(),
        deadline_ms,
        kind: BlockKind::List,
        timeout_reply,
        argv: None,
        wake_on_delete: false,
    })
}

fn blpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    blocking_pop(ctx, argv, End::Head)
}

fn brpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    blocking_pop(ctx, argv, End::Tail)
}

/// BLPOP/BRPOP `key [key ...] timeout`: `[key, element]` from the first
/// non-empty list, logged as `LPOP/RPOP key`. The timeout is checked
/// before the keys.
fn blocking_pop(ctx: &mut Ctx, argv: &[&[u8]], end: End) -> CmdResult {
    let keys = &argv[1..argv.len() - 1];
    let deadline_ms = ctx.parse_block_timeout(argv[argv.len() - 1], true)?;
    let served = match retry_key(ctx) {
        None => pop_first(ctx, keys, end)?,
        Some(Some(key)) => pop_first(ctx, &[key.as_bytes()], end)?,
        Some(None) => None,
    };
    match served {
        Some(reply) => Ok(reply),
        None => block_on_lists(ctx, keys, deadline_ms, Reply::NullArray),
    }
}

/// Pops one element from the first of `keys` holding a non-empty list:
/// `[key, element]`, logged as `LPOP/RPOP key`. `Ok(None)` when no key
/// has elements; WRONGTYPE when a key met before that holds another type.
fn pop_first(ctx: &mut Ctx, keys: &[&[u8]], end: End) -> Result<Option<Reply>, Reply> {
    for &key in keys {
        let Some(value) = pop_one(ctx, key, end)? else {
            continue;
        };
        ctx.log(pop_effect(key, end, None));
        return Ok(Some(Reply::Array(vec![
            Reply::bulk(key),
            Reply::Bulk(value.into_vec()),
        ])));
    }
    Ok(None)
}

/// BLMPOP `timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`: as
/// LMPOP, blocking when every list is empty. The timeout is checked after
/// the other arguments.
fn blmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(argv, 2)?;
    let deadline_ms = ctx.parse_block_timeout(argv[1], true)?;
    let served = match retry_key(ctx) {
        None => mpop_serve(ctx, &keys, end, count)?,
        Some(Some(key)) => mpop_serve(ctx, &[key.as_bytes()], end, count)?,
        Some(None) => None,
    };
    match served {
        Some(reply) => Ok(reply),
        None => block_on_lists(ctx, &keys, deadline_ms, Reply::NullArray),
    }
}

/// BLMOVE `source destination LEFT|RIGHT LEFT|RIGHT timeout`.
fn blmove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let end_from = parse_end(argv[3])?;
    let end_to = parse_end(argv[4])?;
    let deadline_ms = ctx.parse_block_timeout(argv[5], true)?;
    blocking_move(ctx, argv, end_from, end_to, deadline_ms)
}

/// BRPOPLPUSH `source destination timeout` (BLMOVE … RIGHT LEFT).
fn brpoplpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let deadline_ms = ctx.parse_block_timeout(argv[3], true)?;
    blocking_move(ctx, argv, End::Tail, End::Head, deadline_ms)
}

/// Serves BLMOVE/BRPOPLPUSH like LMOVE when the source has elements, or
/// blocks on the source.
///
/// Logged as Redis 7.0 propagates it: served at once, `LMOVE` with the
/// client's own LEFT/RIGHT words (BRPOPLPUSH: `RPOPLPUSH src dst`); served
/// after waiting, `LMOVE` with `left`/`right` spelled by the server. A
/// destination of another type is an error in both cases (the waiting
/// client is unblocked with it). Where blocking is not allowed the answer
/// is a null bulk, but a wait that times out answers a null array, as in
/// Redis.
fn blocking_move(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    end_from: End,
    end_to: End,
    deadline_ms: Option<i64>,
) -> CmdResult {
    let (src, dst) = (argv[1], argv[2]);
    let as_rpoplpush = argv.len() == 4;
    let retry = ctx.ready_key().is_some();
    if retry && !matches!(ctx.lookup_write(src), Some(Value::List(l)) if !l.is_empty()) {
        return block_on_lists(ctx, &[src], deadline_ms, Reply::NullArray);
    }
    let Some(value) = move_element(ctx, src, dst, end_from, end_to)? else {
        if !ctx.may_block() {
            return Ok(Reply::Null);
        }
        return block_on_lists(ctx, &[src], deadline_ms, Reply::NullArray);
    };
    if retry || as_rpoplpush {
        ctx.log(move_effect(src, dst, end_from, end_to, as_rpoplpush));
    } else {
        ctx.log(vec![
            b"LMOVE".to_vec(),
            src.to_vec(),
            dst.to_vec(),
            argv[3].to_vec(),
            argv[4].to_vec(),
        ]);
    }
    Ok(Reply::Bulk(value.into_vec()))
}

fn llen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        ctx.read_list(argv[1])?.map_or(0, |l| l.len() as i64),
    ))
}

/// LRANGE `key start stop`.
fn lrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let start = parse_int(argv[2])?;
    let stop = parse_int(argv[3])?;
    let Some(list) = ctx.read_list(argv[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(Reply::Array(match resolve_range(start, stop, list.len()) {
        Some((from, to)) => list.range(from, to).map(Reply::bulk).collect(),
        None => Vec::new(),
    }))
}

/// LINDEX `key index`: the key is looked up before the index is parsed.
fn lindex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let Some(list) = ctx.read_list(argv[1])? else {
        return Ok(Reply::Null);
    };
    let index = parse_int(argv[2])?;
    Ok(
        match resolve_index(index, list.len()).and_then(|i| list.get(i)) {
            Some(value) => Reply::bulk(value),
            None => Reply::Null,
        },
    )
}

/// LSET `key index element`: the key is looked up before the index is
/// parsed.
fn lset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(list) = ctx.write_list(key)? else {
        return Err(Reply::err(NO_SUCH_KEY_ERR));
    };
    let index = parse_int(argv[2])?;
    let replaced = match resolve_index(index, list.len()) {
        Some(i) => list.set(i, argv[3]),
        None => false,
    };
    if !replaced {
        return Err(Reply::err(INDEX_OUT_OF_RANGE_ERR));
    }
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, "lset", key);
    ctx.dirty(1);
    Ok(Reply::ok())
}

/// LINSERT `key BEFORE|AFTER pivot element`: the new length, 0 when the key
/// is missing, -1 when the pivot is not found.
fn linsert(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let after = if is(argv[2], "after") {
        true
    } else if is(argv[2], "before") {
        false
    } else {
        return syntax_error();
    };
    let key = argv[1];
    let Some(list) = ctx.write_list(key)? else {
        return Ok(Reply::Int(0));
    };
    let Some(pivot) = list.position(argv[3]) else {
        return Ok(Reply::Int(-1));
    };
    list.insert(pivot + usize::from(after), argv[4]);
    let len = list.len();
    ctx.signal_modified(key);
    ctx.notify(notify::LIST, "linsert", key);
    ctx.dirty(1);
    Ok(Reply::Int(len as i64))
}

/// LREM `key count element`: count > 0 removes from the head, < 0 from the
/// tail, 0 removes all.
fn lrem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let count = parse_int(argv[2])?;
    let key = argv[1];
    let Some(list) = ctx.write_list(key)? else {
        return Ok(Reply::Int(0));
    };
    let from = if count < 0 { End::Tail } else { End::Head };
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = list.remove_matching(argv[3], limit, from);
    if removed > 0 {
        ctx.notify(notify::LIST, "lrem", key);
        ctx.elements_removed(key, removed as u64);
    }
    Ok(Reply::Int(removed as i64))
}

/// LTRIM `key start stop`: keeps only the range; an empty range deletes
/// the key.
fn ltrim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let start = parse_int(argv[2])?;
    let stop = parse_int(argv[3])?;
    let key = argv[1];
    let Some(list) = ctx.write_list(key)? else {
        return Ok(Reply::ok());
    };
    let len = list.len();
    let (head, tail) = match resolve_range(start, stop, len) {
        Some((from, to)) => (from, len - to - 1),
        None => (len, 0),
    };
    list.trim(head, tail);
    // Redis signals the key even when nothing was trimmed.
    ctx.notify(notify::LIST, "ltrim", key);
    ctx.elements_removed(key, (head + tail) as u64);
    Ok(Reply::ok())
}

/// LPOS `key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
///
/// The arithmetic wraps like Redis's (RANK -9223372036854775808 negates to
/// itself), so even that extreme answers the same.
fn lpos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let element = argv[2];
    let mut rank: i64 = 1;
    // -1: no COUNT given (a single index reply instead of an array).
    let mut count: i64 = -1;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let has_value = j + 1 < argv.len();
        let opt = argv[j];
        if is(opt, "rank") && has_value {
            j += 1;
            rank = parse_int(argv[j])?;
            if rank == 0 {
                return Err(Reply::err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list",
                ));
            }
        } else if is(opt, "count") && has_value {
            j += 1;
            count = parse_int_in(argv[j], 0, i64::MAX, "ERR COUNT can't be negative")?;
        } else if is(opt, "maxlen") && has_value {
            j += 1;
            maxlen = parse_int_in(argv[j], 0, i64::MAX, "ERR MAXLEN can't be negative")?;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let Some(list) = ctx.read_list(argv[1])? else {
        return Ok(if count != -1 {
            Reply::Array(Vec::new())
        } else {
            Reply::Null
        });
    };
    let len = list.len() as i64;
    let items: Box<dyn Iterator<Item = &[u8]>> = if from_tail {
        Box::new(list.iter().rev())
    } else {
        Box::new(list.iter())
    };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    let mut single: Option<i64> = None;
    for (scanned, item) in (0i64..).zip(items) {
        if maxlen != 0 && scanned >= maxlen {
            break;
        }
        if item != element {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        let index = if from_tail {
            len - scanned - 1
        } else {
            scanned
        };
        if count == -1 {
            single = Some(index);
            break;
        }
        found.push(Reply::Int(index));
        if count != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= count {
            break;
        }
    }
    Ok(if count != -1 {
        Reply::Array(found)
    } else {
        single.map_or(Reply::Null, Reply::Int)
    })
}

/// LMOVE `source destination LEFT|RIGHT LEFT|RIGHT`.
fn lmove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let end_from = parse_end(argv[3])?;
    let end_to = parse_end(argv[4])?;
    move_reply(ctx, argv[1], argv[2], end_from, end_to)
}

/// RPOPLPUSH `source destination` (LMOVE … RIGHT LEFT).
fn rpoplpush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    move_reply(ctx, argv[1], argv[2], End::Tail, End::Head)
}

fn move_reply(ctx: &mut Ctx, src: &[u8], dst: &[u8], end_from: End, end_to: End) -> CmdResult {
    Ok(match move_element(ctx, src, dst, end_from, end_to)? {
        Some(value) => Reply::Bulk(value.into_vec()),
        None => Reply::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::test_support::Fixture;

    fn bulks(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|s| Reply::bulk(s.as_bytes())).collect())
    }

    #[test]
    fn resolve_range_follows_redis_rules() {
        assert_eq!(resolve_range(0, -1, 3), Some((0, 2)));
        assert_eq!(resolve_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(resolve_range(2, 1, 3), None);
        assert_eq!(resolve_range(3, 5, 3), None);
        assert_eq!(resolve_range(0, -4, 3), None);
        assert_eq!(resolve_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(resolve_range(0, 0, 0), None);
    }

    #[test]
    fn resolve_index_follows_redis_rules() {
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
    }

    #[test]
    fn pushes_and_pops_are_logged_as_received() {
        let mut f = Fixture::new();
        assert_eq!(f.run("RPUSH q a b c"), Reply::Int(3));
        assert_eq!(f.run("lpop q"), Reply::bulk(b"a"));
        assert_eq!(f.run("RPOP q 5"), bulks(&["c", "b"]));
        assert_eq!(
            f.effects(),
            ["0: RPUSH q a b c", "0: lpop q", "0: RPOP q 5"]
        );
    }

    #[test]
    fn commands_that_change_nothing_are_not_logged() {
        let mut f = Fixture::new();
        assert_eq!(f.run("LPUSHX q a"), Reply::Int(0));
        assert_eq!(f.run("LPOP q"), Reply::Null);
        assert_eq!(f.run("LPOP q 2"), Reply::NullArray);
        assert_eq!(f.run("LMPOP 2 q r LEFT"), Reply::NullArray);
        assert_eq!(f.run("RPOPLPUSH q r"), Reply::Null);
        f.run("RPUSH q a b");
        f.effects();
        assert_eq!(f.run("LPOP q 0"), Reply::Array(Vec::new()));
        assert_eq!(f.run("LTRIM q 0 -1"), Reply::ok());
        assert_eq!(f.run("LREM q 0 zz"), Reply::Int(0));
        assert_eq!(f.run("LINSERT q BEFORE zz x"), Reply::Int(-1));
        assert!(f.run("LSET q 5 x").is_error());
        assert_eq!(f.effects(), Vec::<String>::new());
    }

    #[test]
    fn lmpop_is_logged_as_a_counted_pop_of_what_was_taken() {
        let mut f = Fixture::new();
        f.run("RPUSH b x y z");
        f.effects();
        assert_eq!(
            f.run("LMPOP 2 a b RIGHT COUNT 10"),
            Reply::Array(vec![Reply::bulk(b"b"), bulks(&["z", "y", "x"])])
        );
        assert_eq!(f.effects(), ["0: RPOP b 3"]);
        f.run("RPUSH a 1 2");
        f.effects();
        assert_eq!(
            f.run("lmpop 1 a left"),
            Reply::Array(vec![Reply::bulk(b"a"), bulks(&["1"])])
        );
        assert_eq!(f.effects(), ["0: LPOP a 1"]);
    }

    #[test]
    fn moves_are_logged_as_received_and_delete_emptied_sources() {
        let mut f = Fixture::new();
        f.run("RPUSH src only");
        f.effects();
        assert_eq!(f.run("LMOVE src dst LEFT RIGHT"), Reply::bulk(b"only"));
        assert!(!f.engine.core().keyspace.db(0).contains(b"src"));
        assert_eq!(f.run("RPOPLPUSH dst dst"), Reply::bulk(b"only"));
        assert_eq!(f.run("LLEN dst"), Reply::Int(1));
        assert_eq!(
            f.effects(),
            ["0: LMOVE src dst LEFT RIGHT", "0: RPOPLPUSH dst dst"]
        );
    }

    #[test]
    fn move_to_a_wrong_type_changes_nothing() {
        let mut f = Fixture::new();
        f.run("RPUSH src a");
        f.run("SET str v");
        f.effects();
        assert!(f.run("LMOVE src str LEFT LEFT").is_error());
        assert_eq!(f.run("LLEN src"), Reply::Int(1));
        assert_eq!(f.effects(), Vec::<String>::new());
    }

    #[test]
    fn trims_and_removals_count_their_changes() {
        let mut f = Fixture::new();
        f.run("RPUSH l a b a c a");
        f.effects();
        assert_eq!(f.run("LREM l -2 a"), Reply::Int(2));
        assert_eq!(f.run("LRANGE l 0 -1"), bulks(&["a", "b", "c"]));
        assert_eq!(f.run("LTRIM l 5 10"), Reply::ok());
        assert!(!f.engine.core().keyspace.db(0).contains(b"l"));
        assert_eq!(f.effects(), ["0: LREM l -2 a", "0: LTRIM l 5 10"]);
        assert_eq!(f.engine.core().dirty, 5 + 2 + 3);
    }

    #[test]
    fn effects_for_the_blocking_layer() {
        assert_eq!(
            pop_effect(b"k", End::Head, None),
            [b"LPOP".to_vec(), b"k".to_vec()]
        );
        assert_eq!(
            pop_effect(b"k", End::Tail, Some(3)),
            [b"RPOP".to_vec(), b"k".to_vec(), b"3".to_vec()]
        );
        assert_eq!(
            move_effect(b"s", b"d", End::Tail, End::Head, false),
            [
                b"LMOVE".to_vec(),
                b"s".to_vec(),
                b"d".to_vec(),
                b"right".to_vec(),
                b"left".to_vec()
            ]
        );
        assert_eq!(
            move_effect(b"s", b"d", End::Tail, End::Head, true),
            [b"RPOPLPUSH".to_vec(), b"s".to_vec(), b"d".to_vec()]
        );
    }

    /// Runs `line` for a second session of `f`'s engine, which blocks.
    fn block(f: &mut Fixture, line: &str) -> crate::command::Session {
        let mut other = f.engine.new_session();
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        f.engine.execute(&mut other, &argv);
        assert!(other.blocked.is_some(), "{line} blocks");
        other
    }

    /// Serves `waiting` as the host does after a command: for every ready
    /// key, each waiting session in turn. Returns the replies of the ones
    /// served.
    fn serve(f: &mut Fixture, waiting: &mut [&mut crate::command::Session]) -> Vec<Reply> {
        let mut replies = Vec::new();
        while f.engine.has_ready_keys() {
            for (db, key, ids) in f.engine.take_ready_keys() {
                for id in ids {
                    if let Some(s) = waiting.iter_mut().find(|s| s.id == id) {
                        replies.extend(f.engine.serve_blocked(s, db, &key));
                    }
                }
            }
        }
        replies
    }

    /// Runs a handler with blocking denied (as inside MULTI/EXEC).
    fn run_denied(f: &mut Fixture, line: &str) -> Reply {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let spec = crate::command::resolve(&argv)
            .expect("the test command exists")
            .1;
        let mut host = crate::command::NullHost;
        let mut ctx = Ctx::new(
            f.engine.core(),
            &mut f.session,
            &mut host,
            crate::engine::now_ms(),
        );
        ctx.deny_blocking = true;
        let reply = match (spec.handler)(&mut ctx, &argv) {
            Ok(r) | Err(r) => r,
        };
        assert!(ctx.block_request.is_none(), "{line} does not block");
        reply
    }

    #[test]
    fn blocking_pops_served_at_once_are_logged_as_plain_pops() {
        let mut f = Fixture::new();
        f.run("RPUSH l a b c d e");
        f.effects();
        assert_eq!(f.run("BLPOP none l 0"), bulks(&["l", "a"]));
        assert_eq!(f.run("brpop l 1.5"), bulks(&["l", "e"]));
        assert_eq!(
            f.run("BLMPOP 0 2 none l RIGHT COUNT 2"),
            Reply::Array(vec![Reply::bulk(b"l"), bulks(&["d", "c"])])
        );
        assert_eq!(
            f.run("BLMPOP 0 1 l LEFT COUNT 9"),
            Reply::Array(vec![Reply::bulk(b"l"), bulks(&["b"])])
        );
        assert_eq!(
            f.effects(),
            ["0: LPOP l", "0: RPOP l", "0: RPOP l 2", "0: LPOP l 1"]
        );
        assert!(!f.engine.core().keyspace.db(0).contains(b"l"));
        assert_eq!(f.engine.core().dirty, 5 + 5);
    }

    #[test]
    fn blocking_moves_served_at_once_keep_the_clients_words() {
        let mut f = Fixture::new();
        f.run("RPUSH s a b c");
        f.effects();
        assert_eq!(f.run("BLMOVE s d Left riGHT 0"), Reply::bulk(b"a"));
        assert_eq!(f.run("BRPOPLPUSH s d 0"), Reply::bulk(b"c"));
        assert_eq!(f.run("LRANGE d 0 -1"), bulks(&["c", "a"]));
        assert_eq!(f.effects(), ["0: LMOVE s d Left riGHT", "0: RPOPLPUSH s d"]);
    }

    #[test]
    fn blocking_commands_check_types_before_blocking() {
        let mut f = Fixture::new();
        f.run("SET str v");
        f.run("RPUSH l a");
        f.effects();
        for line in [
            "BLPOP none str 0",
            "BRPOP str l 0",
            "BLMPOP 0 2 str l LEFT",
            "BLMOVE str l LEFT LEFT 0",
            "BLMOVE l str LEFT LEFT 0",
            "BRPOPLPUSH l str 0",
        ] {
            assert_eq!(f.run(line), Reply::err(crate::types::WRONGTYPE), "{line}");
        }
        // A non-empty key before the wrong one serves the client.
        assert_eq!(f.run("BLPOP l str 0"), bulks(&["l", "a"]));
        // A missing source blocks whatever the destination holds.
        let waiting = block(&mut f, "BLMOVE none str LEFT LEFT 0");
        assert!(waiting.blocked.is_some());
        assert_eq!(f.effects(), ["0: LPOP l"]);
    }

    #[test]
    fn blocking_denied_answers_the_timeout_reply() {
        let mut f = Fixture::new();
        assert_eq!(run_denied(&mut f, "BLPOP a b 0"), Reply::NullArray);
        assert_eq!(run_denied(&mut f, "BRPOP a 1"), Reply::NullArray);
        assert_eq!(run_denied(&mut f, "BLMPOP 0 1 a LEFT"), Reply::NullArray);
        // BLMOVE answers a null bulk here, but a null array on timeout.
        assert_eq!(run_denied(&mut f, "BLMOVE a b LEFT LEFT 0"), Reply::Null);
        assert_eq!(run_denied(&mut f, "BRPOPLPUSH a b 0"), Reply::Null);
        f.run("RPUSH a x");
        assert_eq!(run_denied(&mut f, "BRPOPLPUSH a b 0"), Reply::bulk(b"x"));
        assert_eq!(f.effects(), ["0: RPUSH a x", "0: RPOPLPUSH a b"]);
    }

    #[test]
    fn blocking_requests_name_the_keys_and_timeout_reply() {
        let mut f = Fixture::new();
        let s = block(&mut f, "BLMPOP 2.5 2 a b RIGHT COUNT 3");
        let state = s.blocked.as_ref().expect("blocked");
        assert_eq!(state.request.keys, [Blob::new(b"a"), Blob::new(b"b")]);
        assert_eq!(state.request.kind, BlockKind::List);
        assert_eq!(state.request.timeout_reply, Reply::NullArray);
        let deadline = state.request.deadline_ms.expect("a finite timeout");
        let now = crate::engine::now_ms();
        assert!(deadline > now + 2000 && deadline <= now + 2500);
        let s = block(&mut f, "BLMOVE src dst LEFT LEFT 0");
        let state = s.blocked.as_ref().expect("blocked");
        assert_eq!(state.request.keys, [Blob::new(b"src")]);
        assert_eq!(state.request.deadline_ms, None);
        assert_eq!(state.request.timeout_reply, Reply::NullArray);
        assert_eq!(f.effects(), Vec::<String>::new());
    }

    #[test]
    fn served_after_waiting_is_logged_as_redis_propagates_it() {
        let mut f = Fixture::new();
        let mut pop = block(&mut f, "BRPOP a1 a2 0");
        let mut mpop = block(&mut f, "BLMPOP 0 1 a2 LEFT COUNT 5");
        let mut mv = block(&mut f, "BLMOVE src a1 RIGHT LEFT 0");
        let mut rpl = block(&mut f, "BRPOPLPUSH s2 a2 0");
        f.effects();
        f.run("RPUSH a2 p q r");
        assert_eq!(
            serve(&mut f, &mut [&mut pop, &mut mpop]),
            [
                bulks(&["a2", "r"]),
                Reply::Array(vec![Reply::bulk(b"a2"), bulks(&["p", "q"])])
            ]
        );
        f.run("RPUSH src x");
        assert_eq!(serve(&mut f, &mut [&mut mv, &mut rpl]), [Reply::bulk(b"x")]);
        f.run("RPUSH s2 y");
        assert_eq!(serve(&mut f, &mut [&mut mv, &mut rpl]), [Reply::bulk(b"y")]);
        assert_eq!(
            f.effects(),
            [
                "0: RPUSH a2 p q r",
                "0: RPOP a2",
                "0: LPOP a2 2",
                "0: RPUSH src x",
                "0: LMOVE src a1 right left",
                "0: RPUSH s2 y",
                "0: RPOPLPUSH s2 a2",
            ]
        );
        assert_eq!(f.run("LRANGE a1 0 -1"), bulks(&["x"]));
        assert_eq!(f.run("LRANGE a2 0 -1"), bulks(&["y"]));
    }

    #[test]
    fn a_retry_serves_only_the_ready_key_or_blocks_again() {
        let mut f = Fixture::new();
        let mut first = block(&mut f, "BLPOP k1 k2 0");
        let mut second = block(&mut f, "BLPOP k2 0");
        f.run("RPUSH k1 a");
        f.run("RPUSH k2 b");
        // k1 became ready first: `first` takes from it although k2 has
        // data too, and k2 goes to `second`.
        assert_eq!(
            serve(&mut f, &mut [&mut first, &mut second]),
            [bulks(&["k1", "a"]), bulks(&["k2", "b"])]
        );
        // One element, two waiters: the second blocks again.
        let mut a = block(&mut f, "BLMOVE q d LEFT LEFT 0");
        let mut b = block(&mut f, "BLMOVE q d LEFT LEFT 0");
        f.run("RPUSH q x");
        assert_eq!(serve(&mut f, &mut [&mut a, &mut b]), [Reply::bulk(b"x")]);
        assert!(a.blocked.is_none() && b.blocked.is_some());
        // A destination of another type unblocks the waiter with an error
        // and leaves the source alone.
        f.run("SET d str");
        f.run("RPUSH q y");
        assert_eq!(
            serve(&mut f, &mut [&mut b]),
            [Reply::err(crate::types::WRONGTYPE)]
        );
        assert!(b.blocked.is_none());
        assert_eq!(f.run("LLEN q"), Reply::Int(1));
    }

    #[test]
    fn lpos_rank_count_and_maxlen() {
        let mut f = Fixture::new();
        f.run("RPUSH l a b a c a");
        assert_eq!(f.run("LPOS l a"), Reply::Int(0));
        assert_eq!(f.run("LPOS l a RANK -1"), Reply::Int(4));
        assert_eq!(
            f.run("LPOS l a RANK 2 COUNT 0"),
            Reply::Array(vec![Reply::Int(2), Reply::Int(4)])
        );
        assert_eq!(
            f.run("LPOS l a MAXLEN 2 COUNT 0"),
            Reply::Array(vec![Reply::Int(0)])
        );
        assert_eq!(f.run("LPOS l a RANK 4"), Reply::Null);
        assert_eq!(
            f.run("LPOS l a RANK -9223372036854775808 COUNT 1"),
            Reply::Array(vec![Reply::Int(4), Reply::Int(2), Reply::Int(0)])
        );
    }
}
