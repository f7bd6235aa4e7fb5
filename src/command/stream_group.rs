//! Stream consumer groups (Redis 7.0 `t_stream.c`): XGROUP, XREADGROUP,
//! XACK, XPENDING, XCLAIM, XAUTOCLAIM and XINFO.
//!
//! Replies, errors and the entries-read / lag bookkeeping follow Redis
//! 7.0.15. Logged effects follow what Redis propagates (one XCLAIM per
//! delivered or claimed entry, XGROUP SETID … ENTRIESREAD, XGROUP
//! CREATECONSUMER), plus the few commands Redis leaves out where replaying
//! its propagation would not rebuild the same state (see the notes on
//! XREADGROUP below): replay here must reproduce delivery times,
//! delivery counts and read counters exactly.
//!
//! This file holds the family's table, the helpers the commands share and
//! delivery with the pending entries lists (XREADGROUP, XACK, XPENDING,
//! XCLAIM, XAUTOCLAIM); `groups.rs` holds XGROUP and XINFO.

use std::ops::Bound;

use super::c_str;
use super::stream::{entry_reply, parse_id, parse_strict_id};
use super::{parse_int, BlockKind, BlockRequest, CmdResult, CommandSpec, Ctx, Handler};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::stream::{
    Consumer, ConsumerGroup, PendingEntry, Stream, StreamId, ENTRIES_READ_INVALID,
};
use crate::types::Blob;

mod groups;

use groups::{xgroup, xinfo};

const STREAM: &str = "stream";

/// A command of this family: arity, flags and key positions from the
/// generated metadata ([`super::docs`]) under `full_name`.
const fn spec(name: &'static str, full_name: &'static str, handler: Handler) -> CommandSpec {
    CommandSpec::from_docs(name, full_name, STREAM, handler)
}

/// The commands of this family.
pub static COMMANDS: &[CommandSpec] = &[
    spec("xgroup", "xgroup", super::container_handler).with_subcommands(XGROUP_SUBCOMMANDS),
    spec("xreadgroup", "xreadgroup", xreadgroup),
    spec("xack", "xack", xack),
    spec("xpending", "xpending", xpending),
    spec("xclaim", "xclaim", xclaim),
    spec("xautoclaim", "xautoclaim", xautoclaim),
    spec("xinfo", "xinfo", super::container_handler).with_subcommands(XINFO_SUBCOMMANDS),
];

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    spec("create", "xgroup|create", xgroup),
    spec("createconsumer", "xgroup|createconsumer", xgroup),
    spec("delconsumer", "xgroup|delconsumer", xgroup),
    spec("destroy", "xgroup|destroy", xgroup),
    spec("help", "xgroup|help", xgroup),
    spec("setid", "xgroup|setid", xgroup),
];

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    spec("consumers", "xinfo|consumers", xinfo),
    spec("groups", "xinfo|groups", xinfo),
    spec("help", "xinfo|help", xinfo),
    spec("stream", "xinfo|stream", xinfo),
];

/// A command to log, as its arguments.
type Argv = Vec<Vec<u8>>;

// ---------------------------------------------------------------------------
// Small helpers.

/// Redis's option comparison (`strcasecmp` on the C string).
fn is_opt(arg: &[u8], word: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// An error reply built like `addReplyErrorFormat`: pieces are
/// concatenated (names given as `%s` stop at a NUL byte, which the caller
/// applies), CR and LF become spaces.
fn error_from(parts: &[&[u8]]) -> Reply {
    let bytes: Vec<u8> = parts.concat();
    Reply::error(super::error_text(&bytes))
}

/// `-NOGROUP No such key '<key>' or consumer group '<group>'<suffix>`.
fn no_such_key_or_group(key: &[u8], group: &[u8], suffix: &str) -> Reply {
    error_from(&[
        b"NOGROUP No such key '",
        c_str(key),
        b"' or consumer group '",
        c_str(group),
        b"'",
        suffix.as_bytes(),
    ])
}

/// An integer argument; `msg` (without the `ERR ` prefix Redis adds)
/// replaces the default error, as `getLongLongFromObjectOrReply` does.
fn parse_int_msg(arg: &[u8], msg: &'static str) -> Result<i64, Reply> {
    crate::types::num::parse_i64(arg).ok_or_else(|| Reply::error(format!("ERR {msg}")))
}

/// An ID as a bulk reply.
fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// An ID as a command argument.
fn id_arg(id: StreamId) -> Vec<u8> {
    id.to_bytes()
}

/// Parses a range bound as Redis's `streamParseIntervalIDOrReply`: a `(`
/// prefix makes it exclusive (then `-`/`+` are refused). Returns the ID
/// and whether it is exclusive.
fn parse_interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Reply> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

/// The inclusive start of a range given as an interval bound (XPENDING,
/// XAUTOCLAIM): an exclusive bound moves to the next ID.
fn interval_start(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, exclusive) = parse_interval_id(arg, 0)?;
    if exclusive {
        id.next()
            .ok_or_else(|| Reply::err("ERR invalid start ID for the interval"))
    } else {
        Ok(id)
    }
}

/// The inclusive end of a range given as an interval bound (XPENDING).
fn interval_end(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, exclusive) = parse_interval_id(arg, u64::MAX)?;
    if exclusive {
        id.prev()
            .ok_or_else(|| Reply::err("ERR invalid end ID for the interval"))
    } else {
        Ok(id)
    }
}

// ---------------------------------------------------------------------------
// Read counters and lag (Redis's streamRangeHasTombstones,
// streamEstimateDistanceFromFirstEverEntry, streamReplyWithCGLag).

/// True when the range `start..=end` of `s` may contain a deleted entry.
fn range_has_tombstones(s: &Stream, start: StreamId, end: StreamId) -> bool {
    if s.is_empty() || s.max_deleted_entry_id == StreamId::MIN {
        return false;
    }
    if s.first_id > s.max_deleted_entry_id {
        // The latest deletion is before the first live entry.
        return false;
    }
    start <= s.max_deleted_entry_id && s.max_deleted_entry_id <= end
}

/// The group's lag (entries not yet delivered), None when unknown.
fn group_lag(s: &Stream, group: &ConsumerGroup) -> Option<i64> {
    let added = s.entries_added as i64;
    if s.entries_added == 0 {
        return Some(0);
    }
    if group.entries_read != ENTRIES_READ_INVALID
        && !range_has_tombstones(s, group.last_id, StreamId::MAX)
    {
        return Some(added - group.entries_read);
    }
    let read = s.estimate_entries_read(group.last_id);
    (read != ENTRIES_READ_INVALID).then(|| added - read)
}

/// Moves the group's last delivered ID forward to `id`, keeping the read
/// counter as `streamReplyWithRange` does.
fn advance_group(s: &Stream, group: &mut ConsumerGroup, id: StreamId) {
    if group.entries_read != ENTRIES_READ_INVALID && !range_has_tombstones(s, id, StreamId::MAX) {
        group.entries_read += 1;
    } else if s.entries_added != 0 {
        group.entries_read = s.estimate_entries_read(id);
    }
    group.last_id = id;
}

// ---------------------------------------------------------------------------
// Consumers and PEL bookkeeping.

/// Looks the consumer up, refreshing its seen time, or creates it.
/// Returns true when it was created.
fn touch_consumer(group: &mut ConsumerGroup, name: &[u8], now_ms: i64) -> bool {
    if let Some(consumer) = group.consumers.get_mut(name) {
        consumer.seen_time_ms = now_ms;
        return false;
    }
    group.consumers.insert(
        Blob::new(name),
        Consumer {
            seen_time_ms: now_ms,
            ..Consumer::default()
        },
    );
    true
}

/// Removes `id` from the group's PEL and its owner's; the removed entry.
fn drop_pending(group: &mut ConsumerGroup, id: StreamId) -> Option<PendingEntry> {
    let nack = group.pel.remove(&id)?;
    if let Some(owner) = group.consumers.get_mut(&nack.consumer) {
        owner.pel.remove(&id);
    }
    Some(nack)
}

/// Makes `consumer` the owner of the pending entry `id` (which exists).
fn set_owner(group: &mut ConsumerGroup, id: StreamId, consumer: &[u8]) {
    let ConsumerGroup { pel, consumers, .. } = group;
    let nack = pel
        .get_mut(&id)
        .expect("the caller checked the PEL entry exists");
    if nack.consumer.as_bytes() != consumer {
        if let Some(old) = consumers.get_mut(&nack.consumer) {
            old.pel.remove(&id);
        }
        nack.consumer = Blob::new(consumer);
    }
    if let Some(new) = consumers.get_mut(consumer) {
        new.pel.insert(id);
    }
}

/// The XCLAIM Redis propagates for a delivered or claimed entry
/// (`streamPropagateXCLAIM`): idempotent, with the absolute delivery time,
/// the delivery count and the group's last ID.
fn xclaim_effect(
    key: &[u8],
    group_name: &[u8],
    id: &[u8],
    nack: &PendingEntry,
    last_id: StreamId,
) -> Argv {
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group_name.to_vec(),
        nack.consumer.to_vec(),
        b"0".to_vec(),
        id.to_vec(),
        b"TIME".to_vec(),
        nack.delivery_time_ms.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        nack.delivery_count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        id_arg(last_id),
    ]
}

/// `XGROUP SETID <key> <group> <last-id> ENTRIESREAD <n>`
/// (`streamPropagateGroupID`).
fn setid_effect(key: &[u8], group_name: &[u8], group: &ConsumerGroup) -> Argv {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group_name.to_vec(),
        id_arg(group.last_id),
        b"ENTRIESREAD".to_vec(),
        group.entries_read.to_string().into_bytes(),
    ]
}

/// `XGROUP CREATECONSUMER <key> <group> <consumer>`
/// (`streamPropagateConsumerCreation`).
fn createconsumer_effect(key: &[u8], group_name: &[u8], consumer: &[u8]) -> Argv {
    vec![
        b"XGROUP".to_vec(),
        b"CREATECONSUMER".to_vec(),
        key.to_vec(),
        group_name.to_vec(),
        consumer.to_vec(),
    ]
}

/// Logs `effects`, or nothing at all (the command itself is never logged
/// as received: Redis's `preventCommandPropagation`).
fn log_effects(ctx: &mut Ctx, effects: Vec<Argv>) {
    if effects.is_empty() {
        ctx.log_nothing();
    }
    for argv in effects {
        ctx.log(argv);
    }
}

/// Runs `f` with the stream and its group `name` borrowed apart (the group
/// is taken out of the map meanwhile). None when there is no such group.
fn with_group<R>(
    s: &mut Stream,
    name: &[u8],
    f: impl FnOnce(&Stream, &mut ConsumerGroup) -> R,
) -> Option<R> {
    let (key, mut group) = s.groups.remove_entry(name)?;
    let result = f(s, &mut group);
    s.groups.insert(key, group);
    Some(result)
}

// ---------------------------------------------------------------------------
// XREADGROUP

/// Entries Redis serves a blocked XREAD/XREADGROUP without COUNT
/// (`XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// XREADGROUP's options.
struct ReadGroupArgs<'a> {
    /// BLOCK given: the deadline (None = forever).
    block: Option<Option<i64>>,
    /// COUNT (0 = no limit).
    count: usize,
    noack: bool,
    group: &'a [u8],
    consumer: &'a [u8],
    /// Index of the first key.
    streams_at: usize,
    /// Number of keys.
    streams: usize,
}

/// Parses XREADGROUP's options as `xreadCommand` does (errors in argument
/// order).
fn parse_readgroup_args<'a>(ctx: &Ctx, argv: &[&'a [u8]]) -> Result<ReadGroupArgs<'a>, Reply> {
    let argc = argv.len();
    let mut block = None;
    let mut count = 0usize;
    let mut noack = false;
    let mut group = None;
    let mut streams_at = 0;
    let mut streams = 0;
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let opt = argv[i];
        if is_opt(opt, "BLOCK") && more > 0 {
            if ctx.in_script {
                return Err(Reply::err(
                    "ERR xreadgroup command is not allowed with BLOCK option from scripts",
                ));
            }
            i += 1;
            block = Some(ctx.parse_block_timeout(argv[i], false)?);
        } else if is_opt(opt, "COUNT") && more > 0 {
            i += 1;
            count = usize::try_from(parse_int(argv[i])?).unwrap_or(0);
        } else if is_opt(opt, "STREAMS") && more > 0 {
            streams_at = i + 1;
            let n = argc - streams_at;
            if !n.is_multiple_of(2) {
                return Err(Reply::err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' \
                     must be specified.",
                ));
            }
            streams = n / 2;
            break;
        } else if is_opt(opt, "GROUP") && more >= 2 {
            group = Some((argv[i + 1], argv[i + 2]));
            i += 2;
        } else if is_opt(opt, "NOACK") {
            noack = true;
        } else {
            return super::syntax_error();
        }
        i += 1;
    }
    if streams_at == 0 {
        return super::syntax_error();
    }
    let Some((group, consumer)) = group else {
        return Err(Reply::err("ERR Missing GROUP option for XREADGROUP"));
    };
    Ok(ReadGroupArgs {
        block,
        count,
        noack,
        group,
        consumer,
        streams_at,
        streams,
    })
}

/// What serving one stream produced.
struct Served {
    /// The entries array of the reply.
    entries: Reply,
    /// Effects to log.
    effects: Vec<Argv>,
    /// The consumer was created (the "xgroup-createconsumer" event).
    created: bool,
}

/// One delivery to a consumer from one stream: what [`serve_group`] serves
/// and to whom.
struct Delivery<'a> {
    /// The stream's key (for the logged effects).
    key: &'a [u8],
    /// The group's name (for the logged effects).
    group_name: &'a [u8],
    /// The consumer served.
    consumer: &'a [u8],
    /// Serve from this ID's successor on.
    after: StreamId,
    /// Serve the consumer's own pending entries rather than new ones.
    history: bool,
    /// At most this many entries (0 = no limit).
    count: usize,
    /// NOACK: new entries are not added to the PEL.
    noack: bool,
    /// The time of the delivery.
    now_ms: i64,
}

/// Serves `d.consumer` of `group` from `s`: new entries after `d.after`
/// (`>`) or, with `d.history`, the consumer's own pending entries from
/// `d.after`'s successor on. Updates the PEL, the consumer and the group
/// as `streamReplyWithRange` does and builds the effects to log.
fn serve_group(s: &Stream, group: &mut ConsumerGroup, d: &Delivery) -> Served {
    let Delivery {
        key,
        group_name,
        consumer,
        after,
        history,
        count,
        noack,
        now_ms,
    } = *d;
    let mut effects = Vec::new();
    // Redis's streamIncrID wraps past the last ID to 0-0.
    let start = after.next().unwrap_or(StreamId::MIN);
    let limit = if count == 0 { usize::MAX } else { count };
    let created = touch_consumer(group, consumer, now_ms);
    if created && (noack || history) {
        // Redis propagates the creation only with NOACK (otherwise the
        // XCLAIMs create the consumer); a history read delivers no new
        // entry, so its consumer would be lost on replay without this.
        effects.push(createconsumer_effect(key, group_name, consumer));
    }
    let mut items = Vec::new();
    if history {
        let ids: Vec<StreamId> = group.consumers[consumer]
            .pel
            .range(start..)
            .take(limit)
            .copied()
            .collect();
        for id in ids {
            match s.get(id) {
                Some(fields) => {
                    items.push(entry_reply(id, fields));
                    let nack = group
                        .pel
                        .get_mut(&id)
                        .expect("a consumer's pending ID is in its group's PEL");
                    nack.delivery_time_ms = now_ms;
                    nack.delivery_count += 1;
                    // Redis does not propagate history deliveries; logging
                    // them keeps delivery times and counts after replay.
                    effects.push(xclaim_effect(
                        key,
                        group_name,
                        &id_arg(id),
                        nack,
                        group.last_id,
                    ));
                }
                None => items.push(Reply::Array(vec![id_reply(id), Reply::NullArray])),
            }
        }
        return Served {
            entries: Reply::Array(items),
            effects,
            created,
        };
    }
    let mut moved = false;
    for (id, fields) in s.range(start, StreamId::MAX, false).take(limit) {
        if id > group.last_id {
            advance_group(s, group, id);
            moved = true;
        }
        items.push(entry_reply(id, fields));
        if noack {
            continue;
        }
        // An entry already pending (the group's ID was moved back with
        // SETID) is reassigned and its delivery starts over.
        let nack = group.pel.entry(id).or_insert_with(|| PendingEntry {
            delivery_time_ms: now_ms,
            delivery_count: 1,
            consumer: Blob::new(consumer),
        });
        nack.delivery_time_ms = now_ms;
        nack.delivery_count = 1;
        set_owner(group, id, consumer);
        effects.push(xclaim_effect(
            key,
            group_name,
            &id_arg(id),
            &group.pel[&id],
            group.last_id,
        ));
    }
    if moved {
        // Redis logs the group's new ID only with NOACK; its XCLAIMs carry
        // LASTID but not the read counter, which replay needs as well.
        effects.push(setid_effect(key, group_name, group));
    }
    Served {
        entries: Reply::Array(items),
        effects,
        created,
    }
}

/// The XREAD-shaped reply: a map of key to entries in RESP3, an array of
/// `[key, entries]` pairs in RESP2.
fn read_reply(resp: u8, served: Vec<(Vec<u8>, Reply)>) -> Reply {
    if resp >= 3 {
        Reply::Map(
            served
                .into_iter()
                .map(|(k, e)| (Reply::Bulk(k), e))
                .collect(),
        )
    } else {
        Reply::Array(
            served
                .into_iter()
                .map(|(k, e)| Reply::Array(vec![Reply::Bulk(k), e]))
                .collect(),
        )
    }
}

/// XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key… id…
///
/// Logged effects: one XCLAIM per entry delivered (Redis's form), the
/// group's new ID and read counter as XGROUP SETID … ENTRIESREAD when it
/// moved, and XGROUP CREATECONSUMER for a consumer created with NOACK.
/// Beyond Redis (whose propagation loses these on replay): SETID also
/// without NOACK, XCLAIMs for history re-deliveries, and the creation of
/// a consumer by a history read.
fn xreadgroup(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let args = parse_readgroup_args(ctx, argv)?;
    let keys = &argv[args.streams_at..args.streams_at + args.streams];
    if let Some(ready) = ctx.ready_key().map(<[u8]>::to_vec) {
        return xreadgroup_retry(ctx, &args, keys, &ready);
    }
    let id_args = &argv[args.streams_at + args.streams..];
    // `None` stands for `>`.
    let mut after: Vec<Option<StreamId>> = Vec::with_capacity(args.streams);
    for (key, id) in keys.iter().zip(id_args) {
        let has_group = match ctx.read_stream(key)? {
            Some(s) => s.groups.contains_key(args.group),
            None => false,
        };
        if !has_group {
            return Err(no_such_key_or_group(
                key,
                args.group,
                " in XREADGROUP with GROUP option",
            ));
        }
        let id = c_str(id);
        if id == b"$" {
            return Err(Reply::err(
                "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the \
                 history of this consumer by specifying a proper ID, or use the > ID to get new \
                 messages. The $ ID would just return an empty result set.",
            ));
        }
        if id == b">" {
            after.push(None);
            continue;
        }
        let parsed = parse_strict_id(id_args[after.len()], 0)?;
        // Redis marks `>` with the largest ID, so that ID means `>` too.
        after.push((parsed != StreamId::MAX).then_some(parsed));
    }
    let now = ctx.now_ms;
    let mut served = Vec::new();
    let mut effects = Vec::new();
    for (key, after) in keys.iter().zip(&after) {
        if ctx.read_stream(key)?.is_none() {
            continue;
        }
        let s = ctx.write_stream(key)?.expect("checked just above");
        let result = with_group(s, args.group, |s, group| {
            let (from, history) = match after {
                Some(id) => (*id, true),
                None => {
                    let newer = s.last().is_some_and(|(top, _)| top > group.last_id);
                    if !newer {
                        return None;
                    }
                    (group.last_id, false)
                }
            };
            let delivery = Delivery {
                key,
                group_name: args.group,
                consumer: args.consumer,
                after: from,
                history,
                count: args.count,
                noack: args.noack,
                now_ms: now,
            };
            Some(serve_group(s, group, &delivery))
        })
        .expect("the group was checked while parsing");
        if let Some(result) = result {
            if result.created {
                ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
            }
            served.push((key.to_vec(), result.entries));
            effects.extend(result.effects);
            ctx.dirty(1);
        }
    }
    if !served.is_empty() {
        log_effects(ctx, effects);
        return Ok(read_reply(ctx.session.resp, served));
    }
    ctx.log_nothing();
    match args.block {
        Some(deadline_ms) => ctx.block(block_request(keys, deadline_ms)),
        None => Ok(Reply::NullArray),
    }
}

/// The wait of an XREADGROUP on `keys`: woken by new entries, and by the
/// deletion of a key or its group (the retry then answers an error).
fn block_request(keys: &[&[u8]], deadline_ms: Option<i64>) -> BlockRequest {
    BlockRequest {
        keys: keys.iter().map(|k| Blob::new(k)).collect(),
        deadline_ms,
        kind: BlockKind::Stream,
        timeout_reply: Reply::NullArray,
        argv: None,
        wake_on_delete: true,
    }
}

/// A blocked XREADGROUP runs again because `key` changed: serve from it
/// alone as Redis's `serveClientsBlockedOnStreamKey` (an error when the
/// key or group went away), or block again.
fn xreadgroup_retry(ctx: &mut Ctx, args: &ReadGroupArgs, keys: &[&[u8]], key: &[u8]) -> CmdResult {
    let now = ctx.now_ms;
    let count = if args.count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        args.count
    };
    let Ok(Some(s)) = ctx.write_stream(key) else {
        ctx.log_nothing();
        return Err(Reply::err("UNBLOCKED the stream key no longer exists"));
    };
    let Some(result) = with_group(s, args.group, |s, group| {
        (s.last_id > group.last_id).then(|| {
            let delivery = Delivery {
                key,
                group_name: args.group,
                consumer: args.consumer,
                after: group.last_id,
                history: false,
                count,
                noack: args.noack,
                now_ms: now,
            };
            serve_group(s, group, &delivery)
        })
    }) else {
        ctx.log_nothing();
        return Err(Reply::err(
            "NOGROUP the consumer group this client was blocked on no longer exists",
        ));
    };
    let Some(result) = result else {
        ctx.log_nothing();
        // The engine keeps the original deadline and place in the queue.
        return ctx.block(block_request(keys, args.block.flatten()));
    };
    if result.created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.dirty(1);
    log_effects(ctx, result.effects);
    Ok(read_reply(
        ctx.session.resp,
        vec![(key.to_vec(), result.entries)],
    ))
}

// ---------------------------------------------------------------------------
// XACK

/// XACK key group id…: removes the IDs from the group's PEL.
fn xack(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let has_group = match ctx.read_stream(key)? {
        Some(s) => s.groups.contains_key(argv[2]),
        None => false,
    };
    if !has_group {
        return Ok(Reply::Int(0));
    }
    // All IDs are checked first: the reply cannot be an error once some
    // entries were acknowledged.
    let ids = argv[3..]
        .iter()
        .map(|a| parse_strict_id(a, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let s = ctx
        .write_stream(key)?
        .expect("checked above: the key exists");
    let group = s
        .groups
        .get_mut(argv[2])
        .expect("checked above: the group exists");
    let mut acknowledged = 0;
    for id in ids {
        if drop_pending(group, id).is_some() {
            acknowledged += 1;
        }
    }
    ctx.dirty(acknowledged);
    Ok(Reply::Int(acknowledged as i64))
}

// ---------------------------------------------------------------------------
// XPENDING

/// XPENDING key group [[IDLE min-idle] start end count [consumer]].
fn xpending(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let argc = argv.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return super::syntax_error();
    }
    let key = argv[1];
    let group_name = argv[2];
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle_ms = 0;
        if is_opt(argv[3], "IDLE") {
            min_idle_ms = parse_int(argv[4])?;
            if argc < 8 {
                return super::syntax_error();
            }
            at += 2;
        }
        let count = parse_int(argv[at + 2])?.max(0);
        let start = interval_start(argv[at])?;
        let end = interval_end(argv[at + 1])?;
        let consumer = argv.get(at + 3).copied();
        range = Some((min_idle_ms, start, end, count, consumer));
    }
    let now = ctx.now_ms;
    let Some(s) = ctx.read_stream(key)? else {
        return Err(no_such_key_or_group(key, group_name, ""));
    };
    let Some(group) = s.groups.get(group_name) else {
        return Err(no_such_key_or_group(key, group_name, ""));
    };
    let Some((min_idle_ms, start, end, count, consumer)) = range else {
        // The summary form.
        let (Some((&first, _)), Some((&last, _))) =
            (group.pel.first_key_value(), group.pel.last_key_value())
        else {
            return Ok(Reply::Array(vec![
                Reply::Int(0),
                Reply::Null,
                Reply::Null,
                Reply::NullArray,
            ]));
        };
        let owners = group
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(name, c)| {
                Reply::Array(vec![
                    Reply::bulk(name),
                    Reply::Bulk(c.pel.len().to_string().into_bytes()),
                ])
            })
            .collect();
        return Ok(Reply::Array(vec![
            Reply::Int(group.pel.len() as i64),
            id_reply(first),
            id_reply(last),
            Reply::Array(owners),
        ]));
    };
    // `BTreeMap::range` refuses a start after the end; Redis finds nothing.
    let ids: Box<dyn Iterator<Item = StreamId>> = match consumer {
        _ if start > end => Box::new(std::iter::empty()),
        Some(name) => match group.consumers.get(name) {
            None => return Ok(Reply::Array(Vec::new())),
            Some(c) => Box::new(c.pel.range(start..=end).copied()),
        },
        None => Box::new(group.pel.range(start..=end).map(|(id, _)| *id)),
    };
    let mut items = Vec::new();
    let mut left = count;
    for id in ids {
        if left == 0 {
            break;
        }
        let nack = &group.pel[&id];
        if min_idle_ms != 0 && now.saturating_sub(nack.delivery_time_ms) < min_idle_ms {
            continue;
        }
        left -= 1;
        items.push(Reply::Array(vec![
            id_reply(id),
            Reply::bulk(&nack.consumer),
            Reply::Int(now.saturating_sub(nack.delivery_time_ms).max(0)),
            Reply::Int(nack.delivery_count as i64),
        ]));
    }
    Ok(Reply::Array(items))
}

// ---------------------------------------------------------------------------
// XCLAIM

/// XCLAIM key group consumer min-idle-time id… [IDLE ms] [TIME ms]
/// [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id].
///
/// Logged as one XCLAIM per claimed (or dropped) entry with the absolute
/// delivery time, and XGROUP SETID when only LASTID changed the group.
fn xclaim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let group_name = argv[2];
    let consumer = argv[3];
    let has_group = match ctx.read_stream(key)? {
        Some(s) => s.groups.contains_key(group_name),
        None => false,
    };
    if !has_group {
        return Err(no_such_key_or_group(key, group_name, ""));
    }
    let min_idle_ms = parse_int_msg(argv[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    // IDs until the first argument that is not one; options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argv.len() {
        match parse_strict_id(argv[j], 0) {
            Ok(id) => ids.push((id, argv[j])),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms;
    let mut delivery_time_ms: i64 = -1;
    let mut retry_count: i64 = -1;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = argv[j];
        if is_opt(opt, "FORCE") {
            force = true;
        } else if is_opt(opt, "JUSTID") {
            justid = true;
        } else if is_opt(opt, "IDLE") && more > 0 {
            j += 1;
            let idle = parse_int_msg(argv[j], "Invalid IDLE option argument for XCLAIM")?;
            delivery_time_ms = now.wrapping_sub(idle);
        } else if is_opt(opt, "TIME") && more > 0 {
            j += 1;
            delivery_time_ms = parse_int_msg(argv[j], "Invalid TIME option argument for XCLAIM")?;
        } else if is_opt(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retry_count = parse_int_msg(argv[j], "Invalid RETRYCOUNT option argument for XCLAIM")?;
        } else if is_opt(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = parse_strict_id(argv[j], 0)?;
        } else {
            return Err(error_from(&[
                b"ERR Unrecognized XCLAIM option '",
                c_str(opt),
                b"'",
            ]));
        }
        j += 1;
    }
    // A bogus time (negative, in the future) means now, as in Redis.
    if delivery_time_ms < 0 || delivery_time_ms > now {
        delivery_time_ms = now;
    }
    let s = ctx
        .write_stream(key)?
        .expect("checked above: the key exists");
    let mut created = false;
    let (items, effects, dirty) = with_group(s, group_name, |s, group| {
        let mut effects = Vec::new();
        let mut items = Vec::new();
        let mut dirty = 0u64;
        let mut propagate_last_id = false;
        if last_id > group.last_id {
            group.last_id = last_id;
            propagate_last_id = true;
        }
        let mut consumer_ready = false;
        for &(id, arg) in &ids {
            let pending = group.pel.contains_key(&id);
            if s.get(id).is_none() {
                // The entry is gone: drop it from the PEL (logged first,
                // so that replay drops it too).
                if pending {
                    effects.push(xclaim_effect(
                        key,
                        group_name,
                        arg,
                        &group.pel[&id],
                        group.last_id,
                    ));
                    propagate_last_id = false;
                    dirty += 1;
                    drop_pending(group, id);
                }
                continue;
            }
            let fresh = !pending && force;
            if !pending && !fresh {
                continue;
            }
            if fresh {
                group.pel.insert(
                    id,
                    PendingEntry {
                        delivery_time_ms: now,
                        delivery_count: 1,
                        consumer: Blob::new(consumer),
                    },
                );
            } else if min_idle_ms != 0
                && now.saturating_sub(group.pel[&id].delivery_time_ms) < min_idle_ms
            {
                continue;
            }
            if !consumer_ready {
                if touch_consumer(group, consumer, now) {
                    dirty += 1;
                    created = true;
                }
                consumer_ready = true;
            }
            set_owner(group, id, consumer);
            let nack = group.pel.get_mut(&id).expect("present or just created");
            nack.delivery_time_ms = delivery_time_ms;
            if retry_count >= 0 {
                nack.delivery_count = retry_count as u64;
            } else if !justid {
                nack.delivery_count += 1;
            }
            if justid {
                items.push(id_reply(id));
            } else {
                let fields = s.get(id).expect("checked above: the entry exists");
                items.push(entry_reply(id, fields));
            }
            effects.push(xclaim_effect(
                key,
                group_name,
                arg,
                &group.pel[&id],
                group.last_id,
            ));
            propagate_last_id = false;
            dirty += 1;
        }
        if propagate_last_id {
            effects.push(setid_effect(key, group_name, group));
            dirty += 1;
        }
        (items, effects, dirty)
    })
    .expect("checked above: the group exists");
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.dirty(dirty);
    log_effects(ctx, effects);
    Ok(Reply::Array(items))
}

// ---------------------------------------------------------------------------
// XAUTOCLAIM

/// Redis allocates `count` IDs up front and answers an error when that
/// fails; with its allocator and the usual 47-bit address space the
/// allocation fails somewhere above this many IDs (16 bytes each).
const AUTOCLAIM_MAX_ALLOCATABLE_COUNT: i64 = 1 << 42;

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID].
///
/// Logged as one XCLAIM per claimed or dropped entry (absolute times).
fn xautoclaim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let group_name = argv[2];
    let consumer = argv[3];
    let min_idle_ms =
        parse_int_msg(argv[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = interval_start(argv[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is_opt(argv[j], "COUNT") && more > 0 {
            // LONG_MAX / max(sizeof(streamID), attempts factor).
            const MAX_COUNT: i64 = i64::MAX / 16;
            count = crate::types::num::parse_i64(argv[j + 1])
                .filter(|n| (1..=MAX_COUNT).contains(n))
                .ok_or_else(|| Reply::err("ERR COUNT must be > 0"))?;
            j += 1;
        } else if is_opt(argv[j], "JUSTID") {
            justid = true;
        } else {
            return super::syntax_error();
        }
        j += 1;
    }
    let has_group = match ctx.read_stream(key)? {
        Some(s) => s.groups.contains_key(group_name),
        None => false,
    };
    if !has_group {
        return Err(no_such_key_or_group(key, group_name, ""));
    }
    if count > AUTOCLAIM_MAX_ALLOCATABLE_COUNT {
        return Err(Reply::err(
            "ERR Insufficient memory, failed allocating transient memory, COUNT too high.",
        ));
    }
    let now = ctx.now_ms;
    let s = ctx
        .write_stream(key)?
        .expect("checked above: the key exists");
    let mut created = false;
    let (reply, effects, dirty) = with_group(s, group_name, |s, group| {
        let mut effects = Vec::new();
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut dirty = 0u64;
        let mut attempts = count * 10;
        let mut left = count;
        let mut from = Bound::Included(start);
        let mut at_end = false;
        let mut consumer_ready = false;
        loop {
            if attempts == 0 {
                break;
            }
            attempts -= 1;
            if left == 0 {
                break;
            }
            let Some((&id, _)) = group.pel.range((from, Bound::Unbounded)).next() else {
                at_end = true;
                break;
            };
            from = Bound::Excluded(id);
            if s.get(id).is_none() {
                // The entry is gone: drop it from the PEL and report it.
                effects.push(xclaim_effect(
                    key,
                    group_name,
                    &id_arg(id),
                    &group.pel[&id],
                    group.last_id,
                ));
                dirty += 1;
                drop_pending(group, id);
                deleted.push(id_reply(id));
                left -= 1;
                continue;
            }
            if min_idle_ms != 0 && now.saturating_sub(group.pel[&id].delivery_time_ms) < min_idle_ms
            {
                continue;
            }
            if !consumer_ready {
                if touch_consumer(group, consumer, now) {
                    dirty += 1;
                    created = true;
                }
                consumer_ready = true;
            }
            set_owner(group, id, consumer);
            let nack = group.pel.get_mut(&id).expect("found just above");
            nack.delivery_time_ms = now;
            if !justid {
                nack.delivery_count += 1;
            }
            if justid {
                claimed.push(id_reply(id));
            } else {
                let fields = s.get(id).expect("checked above: the entry exists");
                claimed.push(entry_reply(id, fields));
            }
            left -= 1;
            effects.push(xclaim_effect(
                key,
                group_name,
                &id_arg(id),
                &group.pel[&id],
                group.last_id,
            ));
            dirty += 1;
        }
        // The cursor: the next PEL entry after the last one looked at.
        let cursor = if at_end {
            StreamId::MIN
        } else {
            group
                .pel
                .range((from, Bound::Unbounded))
                .next()
                .map_or(StreamId::MIN, |(id, _)| *id)
        };
        let reply = Reply::Array(vec![
            id_reply(cursor),
            Reply::Array(claimed),
            Reply::Array(deleted),
        ]);
        (reply, effects, dirty)
    })
    .expect("checked above: the group exists");
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.dirty(dirty);
    log_effects(ctx, effects);
    Ok(reply)
}

#[cfg(test)]
mod tests;
