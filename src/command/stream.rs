//! Stream commands (Redis 7.0 `t_stream.c`, without consumer groups):
//! XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID, XREAD.
//!
//! The ID parsers and reply builders are shared with the consumer-group
//! commands (`stream_group.rs`).

use super::c_str;
use super::clients::{BlockKind, BlockRequest};
use super::{arity_error, CmdResult, CommandSpec, Ctx, NOT_INT_ERR, NO_SUCH_KEY_ERR, SYNTAX_ERR};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::num;
use crate::types::stream::{AddError, Fields, NodeLimits, Stream, StreamId, TrimStrategy};
use crate::types::{Blob, Value};

/// The error Redis sends for any malformed stream ID.
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Redis's `string2ull`: `string2ll` when it succeeds (negative values
/// rejected), otherwise C `strtoull` in base 10 over the whole string
/// (leading white space, an optional sign, wrap-around negation of a `-`
/// value, out of range rejected).
fn parse_u64_like_redis(s: &[u8]) -> Option<u64> {
    if let Some(v) = num::parse_i64(s) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let digits = &s[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &d in digits {
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// Parses a stream ID as Redis's `streamGenericParseIDOrReply`. Returns the
/// ID and whether the sequence was given (false for `<ms>-*`, accepted only
/// when `allow_auto_seq`).
fn parse_id_generic(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_auto_seq: bool,
) -> Result<(StreamId, bool), Reply> {
    // Redis copies the argument into a 128-byte buffer first.
    if arg.len() > 127 {
        return Err(Reply::err(INVALID_ID));
    }
    let s = c_str(arg);
    if s == b"-" || s == b"+" {
        if strict {
            return Err(Reply::err(INVALID_ID));
        }
        return Ok((
            if s == b"-" {
                StreamId::MIN
            } else {
                StreamId::MAX
            },
            true,
        ));
    }
    let (ms_part, seq_part) = match s.iter().position(|&b| b == b'-') {
        Some(dash) => (&s[..dash], Some(&s[dash + 1..])),
        None => (s, None),
    };
    let ms = parse_u64_like_redis(ms_part).ok_or_else(|| Reply::err(INVALID_ID))?;
    match seq_part {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if allow_auto_seq => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => {
            let seq = parse_u64_like_redis(seq).ok_or_else(|| Reply::err(INVALID_ID))?;
            Ok((StreamId::new(ms, seq), true))
        }
    }
}

/// Parses a stream ID argument (`<ms>`, `<ms>-<seq>`, `-` or `+`) as
/// Redis's `streamParseIDOrReply`; a missing sequence becomes
/// `missing_seq`.
pub(crate) fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(arg, missing_seq, false, false).map(|(id, _)| id)
}

/// Like [`parse_id`] but rejects `-` and `+` (`streamParseStrictIDOrReply`).
pub(crate) fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Reply> {
    parse_id_generic(arg, missing_seq, true, false).map(|(id, _)| id)
}

/// An ID as a bulk reply.
fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// One entry as Redis replies it: `[id, [field, value, ...]]`.
pub(crate) fn entry_reply(id: StreamId, fields: &Fields) -> Reply {
    let mut flat = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields.iter() {
        flat.push(Reply::bulk(f));
        flat.push(Reply::bulk(v));
    }
    Reply::Array(vec![id_reply(id), Reply::Array(flat)])
}

/// The entries of `stream` with IDs in `start..=end` (descending when
/// `rev`), at most `count` of them; `None` or `Some(0)` means no limit, as
/// a count of 0 does in Redis's `streamReplyWithRange`.
pub(crate) fn range_reply(
    stream: &Stream,
    start: StreamId,
    end: StreamId,
    count: Option<usize>,
    rev: bool,
) -> Reply {
    let limit = match count {
        None | Some(0) => usize::MAX,
        Some(n) => n,
    };
    let items = stream
        .range(start, end, rev)
        .take(limit)
        .map(|(id, fields)| entry_reply(id, fields))
        .collect();
    Reply::Array(items)
}

/// A stream command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "stream", handler)
}

/// The commands of this family.
pub static COMMANDS: &[CommandSpec] = &[
    spec("xadd", xadd),
    spec("xlen", xlen),
    spec("xrange", xrange),
    spec("xrevrange", xrevrange),
    spec("xdel", xdel),
    spec("xtrim", xtrim),
    spec("xsetid", xsetid),
    spec("xread", xread),
];

/// True when the option `arg` is `word`: Redis compares C strings
/// case-insensitively, so an embedded NUL ends the argument.
fn is_opt(arg: &[u8], word: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// Redis's `getLongLongFromObjectOrReply`.
fn parse_ll(arg: &[u8]) -> Result<i64, Reply> {
    num::parse_i64(arg).ok_or(Reply::err(NOT_INT_ERR))
}

/// The node limits XADD builds streams with (`stream-node-max-entries`,
/// `stream-node-max-bytes`).
fn node_limits(ctx: &Ctx) -> NodeLimits {
    NodeLimits {
        max_entries: ctx.core.config.stream_node_max_entries,
        max_bytes: ctx.core.config.stream_node_max_bytes,
    }
}

// ---------------------------------------------------------------------------
// XADD / XTRIM argument parsing (`streamParseAddOrTrimArgsOrReply`).

/// The trimming and XADD options.
#[derive(Debug, Default)]
struct AddTrimArgs {
    /// The explicit ID (XADD), and whether its sequence was given (false
    /// for `<ms>-*`); None for `*`.
    id: Option<(StreamId, bool)>,
    /// Index of the ID argument (XADD).
    id_index: usize,
    /// NOMKSTREAM.
    no_mkstream: bool,
    /// MAXLEN / MINID.
    strategy: Option<TrimStrategy>,
    /// Index of the MAXLEN count / MINID ID argument, which an
    /// approximate trim rewrites for propagation.
    strategy_arg_index: usize,
    /// `~` given.
    approx: bool,
    /// Maximum entries trimmed (0 = no limit).
    limit: u64,
}

fn parse_add_trim_args(ctx: &Ctx, argv: &[&[u8]], xadd: bool) -> Result<AddTrimArgs, Reply> {
    const BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut args = AddTrimArgs::default();
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut i = 2;
    while i < argv.len() {
        let more_args = argv.len() - 1 - i;
        let opt = argv[i];
        if xadd && c_str(opt) == b"*" {
            break;
        } else if is_opt(opt, "maxlen") && more_args > 0 {
            if args.strategy.is_some() {
                return Err(Reply::err(BOTH));
            }
            args.approx = false;
            let next = c_str(argv[i + 1]);
            if more_args >= 2 && next == b"~" {
                args.approx = true;
                i += 1;
            } else if more_args >= 2 && next == b"=" {
                i += 1;
            }
            let max_len = parse_ll(argv[i + 1])?;
            if max_len < 0 {
                return Err(Reply::err("ERR The MAXLEN argument must be >= 0."));
            }
            i += 1;
            args.strategy = Some(TrimStrategy::MaxLen(max_len as u64));
            args.strategy_arg_index = i;
        } else if is_opt(opt, "minid") && more_args > 0 {
            if args.strategy.is_some() {
                return Err(Reply::err(BOTH));
            }
            args.approx = false;
            let next = c_str(argv[i + 1]);
            if more_args >= 2 && next == b"~" {
                args.approx = true;
                i += 1;
            } else if more_args >= 2 && next == b"=" {
                i += 1;
            }
            let min_id = parse_strict_id(argv[i + 1], 0)?;
            i += 1;
            args.strategy = Some(TrimStrategy::MinId(min_id));
            args.strategy_arg_index = i;
        } else if is_opt(opt, "limit") && more_args > 0 {
            limit = parse_ll(argv[i + 1])?;
            if limit < 0 {
                return Err(Reply::err("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && is_opt(opt, "nomkstream") {
            args.no_mkstream = true;
        } else if xadd {
            // Anything else is the ID (or a syntax error reported as an
            // invalid ID).
            args.id = Some(parse_id_generic(opt, 0, true, true)?);
            break;
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
        i += 1;
    }
    args.id_index = i;

    if limit != 0 && args.strategy.is_none() {
        return Err(Reply::err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && args.strategy.is_none() {
        return Err(Reply::err(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if ctx.core.loading {
        // Replay obeys the logged command: the propagated trim argument is
        // exact, so no work limit applies (Redis's `mustObeyClient`).
        args.limit = 0;
    } else if limit_given {
        if !args.approx {
            return Err(Reply::err(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        args.limit = limit as u64;
    } else if args.approx {
        // At most 100 nodes' worth of entries per call, capped both ways.
        let max_entries = node_limits(ctx).max_entries;
        args.limit = match max_entries.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        };
    }
    Ok(args)
}

/// Trims `stream` as `args` ask; when the trim is approximate, rewrites
/// the trim arguments in `log_argv` to the exact equivalent (`= <length>`
/// or `= <first ID>`), as Redis's `streamRewriteApproxSpecifier` /
/// `streamRewriteTrimArgument` do so that replay is deterministic.
fn trim_and_rewrite(
    stream: &mut Stream,
    args: &AddTrimArgs,
    log_argv: &mut [Vec<u8>],
    rewrite_always: bool,
) -> u64 {
    let Some(strategy) = args.strategy else {
        return 0;
    };
    let deleted = stream.trim(strategy, args.approx, args.limit);
    if args.approx && (rewrite_always || deleted > 0) {
        log_argv[args.strategy_arg_index - 1] = b"=".to_vec();
        log_argv[args.strategy_arg_index] = match strategy {
            TrimStrategy::MaxLen(_) => stream.len().to_string().into_bytes(),
            TrimStrategy::MinId(_) => stream.first_id_with_tombstones().to_bytes(),
        };
    }
    deleted
}

fn owned_argv(argv: &[&[u8]]) -> Vec<Vec<u8>> {
    argv.iter().map(|a| a.to_vec()).collect()
}

// ---------------------------------------------------------------------------
// Handlers.

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]
fn xadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let args = parse_add_trim_args(ctx, argv, true)?;
    let field_pos = args.id_index + 1;
    if argv.len() < field_pos + 2 || (argv.len() - field_pos) % 2 == 1 {
        return Err(arity_error("xadd"));
    }
    // Refused before the key is created, so no empty stream is left.
    if let Some((StreamId::MIN, true)) = args.id {
        return Err(Reply::err(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let key = argv[1];
    let now_ms = u64::try_from(ctx.now_ms).unwrap_or(0);
    let limits = node_limits(ctx);
    match ctx.lookup_write(key) {
        Some(Value::Stream(_)) => {}
        Some(_) => return Err(Reply::err(crate::types::WRONGTYPE)),
        None if args.no_mkstream => return Ok(Reply::Null),
        None => ctx.set_key(key, Value::Stream(Box::default()), false),
    }
    let Some(Value::Stream(stream)) = ctx.lookup_write(key) else {
        unreachable!("the stream was found or created above");
    };
    if stream.last_id == StreamId::MAX {
        return Err(Reply::err(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let fields: Fields = argv[field_pos..]
        .chunks_exact(2)
        .map(|pair| (Blob::new(pair[0]), Blob::new(pair[1])))
        .collect();
    let (explicit, seq_given) = match args.id {
        Some((id, seq_given)) => (Some(id), seq_given),
        None => (None, false),
    };
    let id =
        match stream.add(explicit, seq_given, now_ms, fields, limits) {
            Ok(id) => id,
            Err(AddError::IdTooSmall) => return Err(Reply::err(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            )),
            Err(AddError::TooLarge) => {
                return Err(Reply::err("ERR Elements are too large to be stored"))
            }
        };
    let mut log_argv: Option<Vec<Vec<u8>>> = None;
    let mut trimmed = 0;
    if args.approx {
        let log = log_argv.get_or_insert_with(|| owned_argv(argv));
        trimmed = trim_and_rewrite(stream, &args, log, true);
    } else if args.strategy.is_some() {
        trimmed = trim_and_rewrite(stream, &args, &mut [], false);
    }
    if !seq_given {
        // `*` and `<ms>-*` are logged with the ID actually generated.
        log_argv.get_or_insert_with(|| owned_argv(argv))[args.id_index] = id.to_bytes();
    }
    ctx.signal_modified(key);
    ctx.notify(notify::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    ctx.dirty(1);
    if let Some(log) = log_argv {
        ctx.log(log);
    }
    Ok(Reply::Bulk(id.to_bytes()))
}

/// XLEN key
fn xlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let len = ctx.read_stream(argv[1])?.map_or(0, |s| s.len());
    Ok(Reply::Int(len as i64))
}

/// XRANGE key start end [COUNT count]
fn xrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    range_generic(ctx, argv, false)
}

/// XREVRANGE key end start [COUNT count]
fn xrevrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    range_generic(ctx, argv, true)
}

/// Parses a range bound (`streamParseIntervalIDOrReply`): `(` makes it
/// exclusive (then `-`/`+` are invalid). Returns the ID and whether it is
/// exclusive.
fn parse_interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Reply> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

fn range_generic(ctx: &mut Ctx, argv: &[&[u8]], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (argv[3], argv[2])
    } else {
        (argv[2], argv[3])
    };
    let (mut start, start_exclusive) = parse_interval_id(start_arg, 0)?;
    if start_exclusive {
        start = start
            .next()
            .ok_or(Reply::err("ERR invalid start ID for the interval"))?;
    }
    let (mut end, end_exclusive) = parse_interval_id(end_arg, u64::MAX)?;
    if end_exclusive {
        end = end
            .prev()
            .ok_or(Reply::err("ERR invalid end ID for the interval"))?;
    }
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < argv.len() {
        if is_opt(argv[j], "COUNT") && j + 1 < argv.len() {
            count = Some(usize::try_from(parse_ll(argv[j + 1])?).unwrap_or(0));
            j += 2;
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
    }
    let Some(stream) = ctx.read_stream(argv[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == Some(0) {
        return Ok(Reply::NullArray);
    }
    Ok(range_reply(stream, start, end, count, rev))
}

/// XDEL key id [id ...]
fn xdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    if ctx.write_stream(key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    // All IDs are checked before anything is deleted.
    let ids = argv[2..]
        .iter()
        .map(|a| parse_strict_id(a, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let stream = ctx.write_stream(key)?.expect("the stream was found above");
    let deleted = ids.into_iter().filter(|id| stream.remove(*id)).count() as u64;
    if deleted > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::STREAM, "xdel", key);
        ctx.dirty(deleted);
    }
    Ok(Reply::Int(deleted as i64))
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
fn xtrim(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let args = parse_add_trim_args(ctx, argv, false)?;
    let key = argv[1];
    let Some(stream) = ctx.write_stream(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut log_argv = owned_argv(argv);
    let deleted = trim_and_rewrite(stream, &args, &mut log_argv, false);
    if deleted > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::STREAM, "xtrim", key);
        ctx.dirty(deleted);
        if args.approx {
            ctx.log(log_argv);
        }
    }
    Ok(Reply::Int(deleted as i64))
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
fn xsetid(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let id = parse_strict_id(argv[2], 0)?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let more_args = argv.len() - 1 - i;
        if is_opt(argv[i], "ENTRIESADDED") && more_args > 0 {
            let n = parse_ll(argv[i + 1])?;
            if n < 0 {
                return Err(Reply::err("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if is_opt(argv[i], "MAXDELETEDID") && more_args > 0 {
            max_deleted = parse_strict_id(argv[i + 1], 0)?;
            if id < max_deleted {
                return Err(Reply::err(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
        i += 2;
    }
    let key = argv[1];
    let Some(stream) = ctx.write_stream(key)? else {
        return Err(Reply::err(NO_SUCH_KEY_ERR));
    };
    if let Some((top, _)) = stream.last() {
        if id < top {
            return Err(Reply::err(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| (stream.len() as u64) > n) {
            return Err(Reply::err(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    stream.last_id = id;
    if let Some(n) = entries_added {
        stream.entries_added = n;
    }
    if max_deleted != StreamId::MIN {
        stream.max_deleted_entry_id = max_deleted;
    }
    // Redis 7.0's XSETID signals nothing: WATCH does not see it and
    // clients blocked in XREAD are not woken by it.
    ctx.notify(notify::STREAM, "xsetid", key);
    ctx.dirty(1);
    Ok(Reply::ok())
}

/// Entries XREAD serves from a stream a blocked client waited on when it
/// gave no COUNT (Redis's `XREAD_BLOCKED_DEFAULT_COUNT`).
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
fn xread(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // XREAD only reads; a served retry of a blocked XREAD logs nothing
    // either.
    ctx.log_nothing();
    let mut block: Option<Option<i64>> = None;
    let mut count: usize = 0;
    let mut streams_arg = 0;
    let mut i = 1;
    while i < argv.len() {
        let more_args = argv.len() - 1 - i;
        let opt = argv[i];
        if is_opt(opt, "BLOCK") && more_args > 0 {
            if ctx.in_script {
                return Err(Reply::err(
                    "ERR xread command is not allowed with BLOCK option from scripts",
                ));
            }
            i += 1;
            block = Some(ctx.parse_block_timeout(argv[i], false)?);
        } else if is_opt(opt, "COUNT") && more_args > 0 {
            i += 1;
            count = usize::try_from(parse_ll(argv[i])?).unwrap_or(0);
        } else if is_opt(opt, "STREAMS") && more_args > 0 {
            streams_arg = i + 1;
            if !(argv.len() - streams_arg).is_multiple_of(2) {
                return Err(Reply::err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if is_opt(opt, "GROUP") && more_args >= 2 {
            return Err(Reply::err(
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
            ));
        } else if is_opt(opt, "NOACK") {
            return Err(Reply::err(
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
            ));
        } else {
            return Err(Reply::err(SYNTAX_ERR));
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(Reply::err(SYNTAX_ERR));
    }
    let streams = (argv.len() - streams_arg) / 2;
    let keys = &argv[streams_arg..streams_arg + streams];
    let id_args = &argv[streams_arg + streams..];
    let retry = ctx.ready_key().map(Blob::new);

    // The IDs to read after; `$` resolves to the stream's last ID (0-0 when
    // the key is missing). A retry re-parses the stored command, whose `$`
    // were already resolved, and does not look at the other keys.
    let mut ids = Vec::with_capacity(streams);
    let mut resolved_dollar = false;
    for (key, id_arg) in keys.iter().zip(id_args) {
        let last_id = if retry.is_none() {
            match ctx.lookup_read(key) {
                None => Some(StreamId::MIN),
                Some(Value::Stream(s)) => Some(s.last_id),
                Some(_) => return Err(Reply::err(crate::types::WRONGTYPE)),
            }
        } else {
            None
        };
        let id_arg = c_str(id_arg);
        if id_arg == b"$" {
            resolved_dollar = true;
            ids.push(last_id.unwrap_or(StreamId::MIN));
        } else if id_arg == b">" {
            return Err(Reply::err(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
            ));
        } else {
            ids.push(parse_strict_id(id_arg, 0)?);
        }
    }

    if let Some(ready) = retry {
        // Served from the key that became ready alone, when its last ID
        // moved past the one waited for (Redis's
        // `serveClientsBlockedOnStreamKey`).
        // The first occurrence of a repeated key decides, as in Redis.
        let after = keys
            .iter()
            .position(|k| *k == ready.as_bytes())
            .map(|index| ids[index]);
        let count = if count == 0 {
            BLOCKED_DEFAULT_COUNT
        } else {
            count
        };
        if let (Some(after), Some(Value::Stream(s))) = (after, ctx.lookup_read(&ready)) {
            if s.last_id > after {
                let start = after.next().unwrap_or(StreamId::MIN);
                let entries = range_reply(s, start, StreamId::MAX, Some(count), false);
                return Ok(read_reply(ctx, vec![(Reply::bulk(&ready), entries)]));
            }
        }
        return block_xread(ctx, keys, block.flatten(), None);
    }

    let mut served = Vec::new();
    for (key, after) in keys.iter().zip(&ids) {
        let Some(Value::Stream(s)) = ctx.lookup_read(key) else {
            continue;
        };
        let Some((last_valid, _)) = s.last() else {
            continue;
        };
        if last_valid > *after {
            // After the last possible ID Redis wraps to 0-0; unreachable
            // here since a greater live ID exists.
            let start = after.next().unwrap_or(StreamId::MIN);
            let entries = range_reply(s, start, StreamId::MAX, Some(count), false);
            served.push((Reply::bulk(key), entries));
        }
    }
    if !served.is_empty() {
        return Ok(read_reply(ctx, served));
    }
    match block {
        Some(deadline_ms) => {
            let rewritten = resolved_dollar.then(|| {
                let mut stored = owned_argv(argv);
                for (n, id) in ids.iter().enumerate() {
                    if c_str(id_args[n]) == b"$" {
                        stored[streams_arg + streams + n] = id.to_bytes();
                    }
                }
                stored
            });
            block_xread(ctx, keys, deadline_ms, rewritten)
        }
        None => Ok(Reply::NullArray),
    }
}

/// Blocks XREAD on its stream keys; `argv` is the command to run again
/// when it differs from the one received (`$` resolved).
fn block_xread(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    deadline_ms: Option<i64>,
    argv: Option<Vec<Vec<u8>>>,
) -> CmdResult {
    ctx.block(BlockRequest {
        keys: keys.iter().map(|k| Blob::new(k)).collect(),
        deadline_ms,
        kind: BlockKind::Stream,
        timeout_reply: Reply::NullArray,
        argv,
        wake_on_delete: false,
    })
}

/// XREAD's reply: per stream `[key, entries]` in RESP2, a map in RESP3.
fn read_reply(ctx: &Ctx, served: Vec<(Reply, Reply)>) -> Reply {
    if ctx.session.resp >= 3 {
        Reply::Map(served)
    } else {
        Reply::Array(
            served
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![k, v]))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::test_support::Fixture;

    fn fixture() -> Fixture {
        let mut f = Fixture::new();
        f.engine.set_capture_effects(true);
        f
    }

    #[test]
    fn ids_parse_like_streamparseidorreply() {
        assert_eq!(parse_id(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(parse_id(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(parse_id(b"5", 7), Ok(StreamId::new(5, 7)));
        assert_eq!(parse_id(b"5-3", 7), Ok(StreamId::new(5, 3)));
        assert_eq!(parse_id(b"007-+3", 0), Ok(StreamId::new(7, 3)));
        assert_eq!(parse_id(b" 7", 0), Ok(StreamId::new(7, 0)));
        assert_eq!(parse_id(b"7--0", 0), Ok(StreamId::new(7, 0)));
        assert_eq!(
            parse_id(b"1--9223372036854775809", 0),
            Ok(StreamId::new(1, 9_223_372_036_854_775_807))
        );
        assert_eq!(
            parse_id(b"18446744073709551615", 0),
            Ok(StreamId::new(u64::MAX, 0))
        );
        assert_eq!(parse_id(b"+\0junk", 0), Ok(StreamId::MAX));
        for bad in [
            &b""[..],
            b"x",
            b"-1",
            b"1-",
            b"1-x",
            b"18446744073709551616",
            b"5-*",
            b"7--5",
        ] {
            assert_eq!(parse_id(bad, 0), Err(Reply::err(INVALID_ID)), "{bad:?}");
        }
        assert!(parse_id(&[b'1'; 128], 0).is_err());
        assert_eq!(parse_strict_id(b"-", 0), Err(Reply::err(INVALID_ID)));
        assert_eq!(parse_strict_id(b"+", 0), Err(Reply::err(INVALID_ID)));
        assert_eq!(
            parse_id_generic(b"5-*", 0, true, true),
            Ok((StreamId::new(5, 0), false))
        );
    }

    #[test]
    fn replies_have_the_entry_shape() {
        let mut s = Stream::new();
        let fields: Fields = vec![(Blob::from("f"), Blob::from("v"))].into_boxed_slice();
        s.append(StreamId::new(1, 2), fields.clone());
        s.append(StreamId::new(3, 0), fields.clone());
        let entry = Reply::Array(vec![
            Reply::bulk(b"1-2"),
            Reply::Array(vec![Reply::bulk(b"f"), Reply::bulk(b"v")]),
        ]);
        assert_eq!(entry_reply(StreamId::new(1, 2), &fields), entry);
        assert_eq!(
            range_reply(&s, StreamId::MIN, StreamId::MAX, Some(1), false),
            Reply::Array(vec![entry.clone()])
        );
        let Reply::Array(all) = range_reply(&s, StreamId::MIN, StreamId::MAX, Some(0), true) else {
            panic!("an array");
        };
        assert_eq!(all.len(), 2);
        assert_eq!(all[1], entry);
    }

    #[test]
    fn generated_ids_are_logged_concretely() {
        let mut f = fixture();
        let Reply::Bulk(id) = f.run("XADD s * f v") else {
            panic!("an ID");
        };
        let id = String::from_utf8(id).expect("ASCII ID");
        assert_eq!(
            f.run("XADD s 99999999999999-* f v"),
            Reply::bulk(b"99999999999999-0")
        );
        assert_eq!(
            f.run("XADD s 99999999999999-* f v"),
            Reply::bulk(b"99999999999999-1")
        );
        assert_eq!(
            f.run("XADD s 99999999999999-7 f v"),
            Reply::bulk(b"99999999999999-7")
        );
        assert_eq!(
            f.db0_effects(),
            [
                format!("XADD s {id} f v"),
                "XADD s 99999999999999-0 f v".to_string(),
                "XADD s 99999999999999-1 f v".to_string(),
                "XADD s 99999999999999-7 f v".to_string(),
            ]
        );
    }

    #[test]
    fn approximate_trims_are_logged_as_exact_ones() {
        let mut f = fixture();
        for i in 1..=250 {
            f.run(&format!("XADD s {i}-0 f v"));
        }
        f.db0_effects();
        assert_eq!(
            f.run("XADD s MAXLEN ~ 120 LIMIT 500 251-* f v"),
            Reply::bulk(b"251-0")
        );
        assert_eq!(f.run("XADD s MINID ~ 1 252-0 f v"), Reply::bulk(b"252-0"));
        assert_eq!(f.run("XADD s MAXLEN 1000 253-0 f v"), Reply::bulk(b"253-0"));
        assert_eq!(f.run("XTRIM s MAXLEN ~ 200"), Reply::Int(0));
        assert_eq!(f.run("XTRIM s MAXLEN 100"), Reply::Int(53));
        assert_eq!(f.run("XTRIM s MINID ~ 250"), Reply::Int(47));
        assert_eq!(f.run("XTRIM s MAXLEN = 0"), Reply::Int(53));
        assert_eq!(
            f.db0_effects(),
            [
                "XADD s MAXLEN = 151 LIMIT 500 251-0 f v",
                "XADD s MINID = 101-0 252-0 f v",
                "XADD s MAXLEN 1000 253-0 f v",
                "XTRIM s MAXLEN 100",
                "XTRIM s MINID = 201-0",
                "XTRIM s MAXLEN = 0",
            ]
        );
        // A stream emptied by an approximate MINID trim logs the largest ID.
        assert_eq!(f.run("XADD e MINID ~ 9 1-0 f v"), Reply::bulk(b"1-0"));
        assert_eq!(
            f.db0_effects(),
            ["XADD e MINID = 18446744073709551615-18446744073709551615 1-0 f v"]
        );
    }

    #[test]
    fn reads_and_failed_writes_log_nothing() {
        let mut f = fixture();
        f.run("XADD s 1-0 f v");
        f.db0_effects();
        f.run("XREAD STREAMS s 0");
        f.run("XREAD BLOCK 10 STREAMS s $");
        f.run("XRANGE s - +");
        f.run("XLEN s");
        assert_eq!(f.run("XDEL s 5-0"), Reply::Int(0));
        assert_eq!(f.run("XTRIM s MAXLEN 5"), Reply::Int(0));
        assert!(f.run("XADD s 1-0 f v").is_error());
        assert_eq!(f.run("XADD t NOMKSTREAM 1-0 f v"), Reply::Null);
        assert!(f.run("XSETID s 0-5").is_error());
        assert_eq!(f.db0_effects(), Vec::<String>::new());
        assert_eq!(f.run("XSETID s 7-0 ENTRIESADDED 9"), Reply::ok());
        assert_eq!(f.run("XDEL s 1-0 2-0"), Reply::Int(1));
        assert_eq!(
            f.db0_effects(),
            ["XSETID s 7-0 ENTRIESADDED 9", "XDEL s 1-0 2-0"]
        );
    }

    #[test]
    fn replay_obeys_the_logged_trim_without_a_work_limit() {
        let mut f = fixture();
        for i in 1..=30 {
            f.run(&format!("XADD s {i}-0 f v"));
        }
        assert!(f.run("XTRIM s MAXLEN 5 LIMIT 3").is_error());
        f.engine.core().loading = true;
        assert_eq!(f.run("XTRIM s MAXLEN 5 LIMIT 3"), Reply::Int(25));
        f.engine.core().loading = false;
        assert_eq!(f.run("XLEN s"), Reply::Int(5));
    }

    #[test]
    fn xread_replies_per_protocol() {
        let mut f = fixture();
        f.run("XADD a 1-0 f v");
        let entries = Reply::Array(vec![entry_reply(
            StreamId::new(1, 0),
            &vec![(Blob::from("f"), Blob::from("v"))].into_boxed_slice(),
        )]);
        assert_eq!(
            f.run("XREAD STREAMS a b 0 0"),
            Reply::Array(vec![Reply::Array(vec![Reply::bulk(b"a"), entries.clone()])])
        );
        f.session.resp = 3;
        assert_eq!(
            f.run("XREAD STREAMS a b 0 0"),
            Reply::Map(vec![(Reply::bulk(b"a"), entries)])
        );
        assert_eq!(f.run("XREAD STREAMS a 1"), Reply::NullArray);
    }
}
