//! Sorted-set commands (Redis's `t_zset.c`), byte for byte as Redis 7.0.
//!
//! Parsing follows Redis's order of checks, because the first failing
//! check decides which error a client sees. Replies with scores are
//! [`Reply::Double`]; WITHSCORES replies are flat in RESP2 and nested
//! `[member, score]` pairs in RESP3, as Redis 7.0 sends them.
//!
//! Logged effects: most writes are logged as received (they are
//! deterministic given the keyspace). ZMPOP is logged as ZPOPMIN/ZPOPMAX
//! with the number of elements popped, as Redis propagates it, and a
//! *STORE command whose result is empty and that removed the destination
//! is logged as `DEL destination`. The blocking pops (BZPOPMIN, BZPOPMAX,
//! BZMPOP) share ZPOPMIN/ZMPOP's code and are logged as the plain pop they
//! performed, whether served at once or after waiting.

use super::c_str;
use super::clients::{BlockKind, BlockRequest};
use super::{is, parse_int, syntax_error, CmdResult, CommandSpec, Ctx, NOT_FLOAT_ERR, NOT_INT_ERR};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::num::{format_g17, parse_f64};
use crate::types::ordtree::cmp_key;
use crate::types::zset::{
    listpack_score_text, AddFlags, LexBound, LexRange, RangeSpec, ScoreRange, ZSet,
};
use crate::types::{Blob, Value, WRONGTYPE};

/// A sorted_set command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "sorted_set", handler)
}

/// The sorted_set family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("zadd", zadd),
    spec("zincrby", zincrby),
    spec("zrem", zrem),
    spec("zremrangebyscore", zremrangebyscore),
    spec("zremrangebyrank", zremrangebyrank),
    spec("zremrangebylex", zremrangebylex),
    spec("zunionstore", zunionstore),
    spec("zinterstore", zinterstore),
    spec("zdiffstore", zdiffstore),
    spec("zunion", zunion),
    spec("zinter", zinter),
    spec("zintercard", zintercard),
    spec("zdiff", zdiff),
    spec("zrange", zrange),
    spec("zrangestore", zrangestore),
    spec("zrangebyscore", zrangebyscore),
    spec("zrevrangebyscore", zrevrangebyscore),
    spec("zrangebylex", zrangebylex),
    spec("zrevrangebylex", zrevrangebylex),
    spec("zcount", zcount),
    spec("zlexcount", zlexcount),
    spec("zrevrange", zrevrange),
    spec("zcard", zcard),
    spec("zscore", zscore),
    spec("zmscore", zmscore),
    spec("zrank", zrank),
    spec("zrevrank", zrevrank),
    spec("zscan", zscan),
    spec("zpopmin", zpopmin),
    spec("zpopmax", zpopmax),
    spec("zmpop", zmpop),
    spec("bzpopmin", bzpopmin),
    spec("bzpopmax", bzpopmax),
    spec("bzmpop", bzmpop),
    spec("zrandmember", zrandmember),
];

// ---------------------------------------------------------------------------
// Argument parsing.

/// `LONG_MAX`, the bound of Redis's `long` arguments.
const LONG_MAX: i64 = i64::MAX;

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A score, weight or increment as Redis's `string2d` accepts it: the
/// whole argument is a float (no spaces), not NaN, and neither overflows
/// to infinity nor underflows to zero.
fn parse_strict_float(arg: &[u8]) -> Option<f64> {
    parse_f64(arg)
}

/// A score for ZADD / ZINCRBY.
fn score_arg(arg: &[u8]) -> Result<f64, Reply> {
    parse_strict_float(arg).ok_or(Reply::err(NOT_FLOAT_ERR))
}

/// A range bound as `zslParseRange` reads it with `strtod` over a C
/// string: leading spaces skipped, an empty string is 0, overflow gives
/// infinity, and NaN or trailing junk is an error.
fn parse_strtod(arg: &[u8]) -> Option<f64> {
    let text = c_str(arg);
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text.iter().position(|&b| !is_c_space(b))?;
    crate::types::num::parse_f64_any_range(&text[start..])
}

fn parse_score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    match arg.first() {
        Some(b'(') => parse_strtod(&arg[1..]).map(|v| (v, true)),
        _ => parse_strtod(arg).map(|v| (v, false)),
    }
}

/// `min max` of ZRANGEBYSCORE and friends.
fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    match (parse_score_bound(min), parse_score_bound(max)) {
        (Some((min, min_exclusive)), Some((max, max_exclusive))) => Ok(ScoreRange {
            min,
            max,
            min_exclusive,
            max_exclusive,
        }),
        _ => Err(Reply::err("ERR min or max is not a float")),
    }
}

fn parse_lex_bound(arg: &[u8]) -> Option<LexBound<'_>> {
    let second_is_end = arg.len() == 1 || arg.get(1) == Some(&0);
    match arg.first()? {
        b'+' if second_is_end => Some(LexBound::Max),
        b'-' if second_is_end => Some(LexBound::Min),
        b'(' => Some(LexBound::Exclusive(&arg[1..])),
        b'[' => Some(LexBound::Inclusive(&arg[1..])),
        _ => None,
    }
}

/// `min max` of ZRANGEBYLEX and friends.
fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Result<LexRange<'a>, Reply> {
    match (parse_lex_bound(min), parse_lex_bound(max)) {
        (Some(min), Some(max)) => Ok(LexRange { min, max }),
        _ => Err(Reply::err("ERR min or max not valid string range item")),
    }
}

/// Redis's `getRangeLongFromObjectOrReply` with a custom message used for
/// both the parse error and the range error.
fn parse_long_in(arg: &[u8], min: i64, max: i64, msg: &'static str) -> Result<i64, Reply> {
    match crate::types::num::parse_i64(arg) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Reply::err(msg)),
    }
}

// ---------------------------------------------------------------------------
// Reply helpers.

/// Appends one element of a range reply: the member, and with scores the
/// score (flat in RESP2, a `[member, score]` pair in RESP3).
fn push_element(out: &mut Vec<Reply>, member: &[u8], score: f64, withscores: bool, resp3: bool) {
    if withscores && resp3 {
        out.push(Reply::Array(vec![
            Reply::bulk(member),
            Reply::Double(score),
        ]));
    } else {
        out.push(Reply::bulk(member));
        if withscores {
            out.push(Reply::Double(score));
        }
    }
}

fn elements_reply<'a>(
    elements: impl ExactSizeIterator<Item = (&'a [u8], f64)>,
    withscores: bool,
    resp3: bool,
) -> Reply {
    let per = if withscores && !resp3 { 2 } else { 1 };
    let mut out = Vec::with_capacity(elements.len() * per);
    for (member, score) in elements {
        push_element(&mut out, member, score, withscores, resp3);
    }
    Reply::Array(out)
}

fn is_resp3(ctx: &Ctx) -> bool {
    ctx.session.resp >= 3
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZREMRANGEBY*.

fn zadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, argv, false)
}

fn zincrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, argv, true)
}

/// ZADD and ZINCRBY (`zaddGenericCommand`). ZINCRBY goes through the same
/// option parser, so `ZINCRBY key nx member` is a syntax error as in Redis.
fn zadd_generic(ctx: &mut Ctx, argv: &[&[u8]], incr_command: bool) -> CmdResult {
    let mut flags = AddFlags {
        incr: incr_command,
        ..AddFlags::default()
    };
    let mut ch = false;
    let mut score_idx = 2;
    while score_idx < argv.len() {
        let opt = argv[score_idx];
        if is(opt, "nx") {
            flags.nx = true;
        } else if is(opt, "xx") {
            flags.xx = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            flags.incr = true;
        } else if is(opt, "gt") {
            flags.gt = true;
        } else if is(opt, "lt") {
            flags.lt = true;
        } else {
            break;
        }
        score_idx += 1;
    }
    let elements = argv.len() - score_idx;
    if !elements.is_multiple_of(2) || elements == 0 {
        return syntax_error();
    }
    let pairs = elements / 2;
    if flags.nx && flags.xx {
        return Err(Reply::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(Reply::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && pairs > 1 {
        return Err(Reply::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    // Every score is checked before anything changes: the command applies
    // fully or not at all. Small batches need no allocation.
    let mut small = [0f64; 8];
    let mut large = Vec::new();
    let scores: &mut [f64] = if pairs <= small.len() {
        &mut small[..pairs]
    } else {
        large.resize(pairs, 0.0);
        &mut large
    };
    for (j, slot) in scores.iter_mut().enumerate() {
        *slot = score_arg(argv[score_idx + 2 * j])?;
    }

    let key = argv[1];
    let limits = ctx.limits();
    let mut added = 0u64;
    let mut updated = 0u64;
    let mut processed = false;
    let mut last_score = 0.0;
    let mut nan = false;
    let mut apply = |z: &mut ZSet| {
        for (j, &score) in scores.iter().enumerate() {
            let member = argv[score_idx + 1 + 2 * j];
            match z.add(member, score, flags, &limits) {
                Ok(out) => {
                    added += u64::from(out.added);
                    updated += u64::from(out.updated);
                    if out.processed {
                        processed = true;
                        last_score = out.score;
                    }
                }
                Err(_) => {
                    nan = true;
                    return;
                }
            }
        }
    };
    match ctx.write_zset(key)? {
        Some(z) => apply(z),
        None if flags.xx => {}
        None => {
            let mut z = ZSet::for_first_member(argv[score_idx + 1].len(), &limits);
            apply(&mut z);
            if !z.is_empty() {
                ctx.set_key(key, Value::ZSet(Box::new(z)), false);
            }
        }
    }
    if added + updated > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::ZSET, if flags.incr { "zincr" } else { "zadd" }, key);
    }
    if nan {
        return Err(Reply::err("ERR resulting score is not a number (NaN)"));
    }
    ctx.dirty(added + updated);
    if flags.incr {
        Ok(if processed {
            Reply::Double(last_score)
        } else {
            Reply::Null
        })
    } else {
        Ok(Reply::Int(
            (if ch { added + updated } else { added }) as i64,
        ))
    }
}

fn zrem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(z) = ctx.write_zset(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut deleted = 0u64;
    for member in &argv[2..] {
        if z.remove(member) {
            deleted += 1;
        }
        if z.is_empty() {
            break;
        }
    }
    if deleted > 0 {
        ctx.notify(notify::ZSET, "zrem", key);
        ctx.elements_removed(key, deleted);
    }
    Ok(Reply::Int(deleted as i64))
}

/// Clamps Redis-style `start`/`end` indexes (negative from the end) to
/// `0..len`; `None` when the range is empty.
fn clamp_rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut end = if end < 0 {
        end.saturating_add(len)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

enum RemoveRange<'a> {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange<'a>),
}

fn zremrangebyrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let start = parse_int(argv[2])?;
    let end = parse_int(argv[3])?;
    zremrange_generic(ctx, argv[1], RemoveRange::Rank(start, end))
}

fn zremrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let range = parse_score_range(argv[2], argv[3])?;
    zremrange_generic(ctx, argv[1], RemoveRange::Score(range))
}

fn zremrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let range = parse_lex_range(argv[2], argv[3])?;
    zremrange_generic(ctx, argv[1], RemoveRange::Lex(range))
}

fn zremrange_generic(ctx: &mut Ctx, key: &[u8], range: RemoveRange<'_>) -> CmdResult {
    let Some(z) = ctx.write_zset(key)? else {
        return Ok(Reply::Int(0));
    };
    let event = match range {
        RemoveRange::Rank(..) => "zremrangebyrank",
        RemoveRange::Score(_) => "zremrangebyscore",
        RemoveRange::Lex(_) => "zremrangebylex",
    };
    let deleted = match range {
        RemoveRange::Rank(start, end) => match clamp_rank_range(start, end, z.len()) {
            Some((start, end)) => z.remove_ranks(start, end + 1).len(),
            None => return Ok(Reply::Int(0)),
        },
        RemoveRange::Score(r) => z.remove_in_range(&r),
        RemoveRange::Lex(r) => z.remove_in_range(&r),
    };
    if deleted > 0 {
        ctx.notify(notify::ZSET, event, key);
        ctx.elements_removed(key, deleted as u64);
    }
    Ok(Reply::Int(deleted as i64))
}

// ---------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (and *STORE), ZINTERCARD.

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate` (a sum of +inf and -inf counts as 0).
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// One input of a set operation.
struct Source<'a> {
    /// Index of the key argument (equal indexes = the same object).
    arg: usize,
    value: Option<&'a Value>,
    weight: f64,
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self.value {
            Some(Value::ZSet(z)) => z.len(),
            Some(Value::Set(s)) => s.len(),
            _ => 0,
        }
    }

    /// The member's score in this input (1 for members of a plain set).
    fn find(&self, member: &[u8]) -> Option<f64> {
        match self.value {
            Some(Value::ZSet(z)) => z.score(member),
            Some(Value::Set(s)) => s.contains(member).then_some(1.0),
            _ => None,
        }
    }

    /// Calls `f` for every element. Sorted sets are walked from the
    /// highest score down, as Redis's `zuiNext` does.
    fn for_each(&self, mut f: impl FnMut(&[u8], f64) -> bool) {
        match self.value {
            Some(Value::ZSet(z)) => {
                for (member, score) in z.iter_from(z.len().wrapping_sub(1), true) {
                    if !f(member, score) {
                        return;
                    }
                }
            }
            Some(Value::Set(s)) => {
                for member in s.iter() {
                    if !member.with_bytes(|b| f(b, 1.0)) {
                        return;
                    }
                }
            }
            _ => {}
        }
    }
}

fn zunionstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, Some(argv[1]), 2, SetOp::Union, false)
}

fn zinterstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, Some(argv[1]), 2, SetOp::Inter, false)
}

fn zdiffstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, Some(argv[1]), 2, SetOp::Diff, false)
}

fn zunion(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, None, 1, SetOp::Union, false)
}

fn zinter(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, None, 1, SetOp::Inter, false)
}

fn zintercard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, None, 1, SetOp::Inter, true)
}

fn zdiff(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_op_command(ctx, argv, None, 1, SetOp::Diff, false)
}

/// `zunionInterDiffGenericCommand`.
fn set_op_command(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    dst: Option<&[u8]>,
    numkeys_idx: usize,
    op: SetOp,
    cardinality_only: bool,
) -> CmdResult {
    let setnum = parse_int(argv[numkeys_idx])?;
    if setnum < 1 {
        let name = String::from_utf8_lossy(argv[0]).to_ascii_lowercase();
        return Err(Reply::error(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first_key = numkeys_idx + 1;
    if setnum > (argv.len() - first_key) as i64 {
        return syntax_error();
    }
    let setnum = setnum as usize;
    // Look every key up first (expiry, statistics, WRONGTYPE), as Redis
    // does before it parses the options.
    for key in &argv[first_key..first_key + setnum] {
        match ctx.lookup_read(key) {
            None | Some(Value::ZSet(_)) | Some(Value::Set(_)) => {}
            Some(_) => return Err(Reply::err(WRONGTYPE)),
        }
    }
    let mut weights = vec![1.0f64; setnum];
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut limit: i64 = 0;
    let mut j = first_key + setnum;
    while j < argv.len() {
        let remaining = argv.len() - j;
        if op != SetOp::Diff && !cardinality_only && remaining > setnum && is(argv[j], "weights") {
            j += 1;
            for weight in weights.iter_mut() {
                *weight = parse_strict_float(argv[j])
                    .ok_or(Reply::err("ERR weight value is not a float"))?;
                j += 1;
            }
        } else if op != SetOp::Diff
            && !cardinality_only
            && remaining >= 2
            && is(argv[j], "aggregate")
        {
            let name = argv[j + 1];
            how = if is(name, "sum") {
                Aggregate::Sum
            } else if is(name, "min") {
                Aggregate::Min
            } else if is(name, "max") {
                Aggregate::Max
            } else {
                return syntax_error();
            };
            j += 2;
        } else if dst.is_none() && !cardinality_only && is(argv[j], "withscores") {
            withscores = true;
            j += 1;
        } else if cardinality_only && remaining >= 2 && is(argv[j], "limit") {
            limit = parse_long_in(argv[j + 1], 0, LONG_MAX, "ERR LIMIT can't be negative")?;
            j += 2;
        } else {
            return syntax_error();
        }
    }

    let db = &*ctx.db();
    let mut sources: Vec<Source<'_>> = (0..setnum)
        .map(|i| Source {
            arg: first_key + i,
            value: db.get(argv[first_key + i]),
            weight: weights[i],
        })
        .collect();
    // The same key given twice is the same object in Redis; compare names.
    let same_key = |a: &Source, b: &Source| a.value.is_some() && argv[a.arg] == argv[b.arg];
    if op != SetOp::Diff {
        // Smallest first; stable like glibc's merge-sort qsort, so inputs of
        // equal size keep their order (it decides the order of additions).
        sources.sort_by_key(|s| s.len());
    }

    let mut result: Vec<(Blob, f64)> = Vec::new();
    let mut cardinality: i64 = 0;
    match op {
        SetOp::Inter => {
            let (first, rest) = sources.split_first().expect("at least one input");
            if first.len() > 0 {
                first.for_each(|member, score| {
                    let mut acc = first.weight * score;
                    if acc.is_nan() {
                        acc = 0.0;
                    }
                    for other in rest {
                        let value = if same_key(other, first) {
                            Some(score)
                        } else {
                            other.find(member)
                        };
                        match value {
                            Some(v) => aggregate(&mut acc, v * other.weight, how),
                            None => return true,
                        }
                    }
                    if cardinality_only {
                        cardinality += 1;
                        return !(limit > 0 && cardinality >= limit);
                    }
                    result.push((Blob::new(member), acc));
                    true
                });
            }
        }
        SetOp::Union => {
            let mut acc: std::collections::HashMap<Blob, f64, foldhash::fast::RandomState> =
                std::collections::HashMap::default();
            for source in &sources {
                source.for_each(|member, score| {
                    let mut value = source.weight * score;
                    if value.is_nan() {
                        value = 0.0;
                    }
                    match acc.get_mut(member) {
                        Some(slot) => aggregate(slot, value, how),
                        None => {
                            acc.insert(Blob::new(member), value);
                        }
                    }
                    true
                });
            }
            result = acc.into_iter().collect();
        }
        SetOp::Diff => {
            let (first, rest) = sources.split_first().expect("at least one input");
            if first.len() > 0 && !rest.iter().any(|s| same_key(s, first)) {
                first.for_each(|member, score| {
                    if !rest.iter().any(|s| s.find(member).is_some()) {
                        result.push((Blob::new(member), score));
                    }
                    true
                });
            }
        }
    }
    drop(sources);
    if cardinality_only {
        return Ok(Reply::Int(cardinality));
    }
    result.sort_by(|a, b| cmp_key(a.1, &a.0, b.1, &b.0));

    let Some(dst) = dst else {
        let resp3 = is_resp3(ctx);
        return Ok(elements_reply(
            result.iter().map(|(m, s)| (m.as_bytes(), *s)),
            withscores,
            resp3,
        ));
    };
    let event = match op {
        SetOp::Union => "zunionstore",
        SetOp::Inter => "zinterstore",
        SetOp::Diff => "zdiffstore",
    };
    Ok(store_result(ctx, dst, result, event))
}

/// Stores a *STORE result: the set (in the encoding that fits it) when
/// not empty (with the keyspace event `event`), otherwise removes the
/// destination.
fn store_result(ctx: &mut Ctx, dst: &[u8], entries: Vec<(Blob, f64)>, event: &str) -> Reply {
    if entries.is_empty() {
        if ctx.delete_key(dst) {
            ctx.dirty(1);
            ctx.log(vec![b"DEL".to_vec(), dst.to_vec()]);
        }
        return Reply::Int(0);
    }
    let limits = ctx.limits();
    let count = entries.len();
    let z = ZSet::from_sorted(entries, &limits);
    ctx.set_key(dst, Value::ZSet(Box::new(z)), false);
    ctx.notify(notify::ZSET, event, dst);
    ctx.dirty(1);
    Reply::Int(count as i64)
}

// ---------------------------------------------------------------------------
// ZRANGE and its variants.

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Auto,
    Forward,
    Reverse,
}

fn zrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Auto, Direction::Auto)
}

fn zrangestore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(
        ctx,
        argv,
        2,
        Some(argv[1]),
        RangeType::Auto,
        Direction::Auto,
    )
}

fn zrevrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Rank, Direction::Reverse)
}

fn zrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Score, Direction::Forward)
}

fn zrevrangebyscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Score, Direction::Reverse)
}

fn zrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Lex, Direction::Forward)
}

fn zrevrangebylex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, argv, 1, None, RangeType::Lex, Direction::Reverse)
}

/// The elements a score or lex range selects, as Redis walks them: from
/// the first (last, when reversed) element in range, skip `offset`
/// elements without checking them, then take elements while they are in
/// range, at most `limit` (negative: no limit). A negative offset selects
/// nothing (Redis's skip loop runs off the end).
fn select_in_range<'z>(
    z: &'z ZSet,
    range: &impl RangeSpec,
    offset: i64,
    limit: i64,
    reverse: bool,
) -> Vec<(&'z [u8], f64)> {
    let start = if reverse {
        z.last_in_range(range)
    } else {
        z.first_in_range(range)
    };
    let Some(start) = start else {
        return Vec::new();
    };
    if offset < 0 {
        return Vec::new();
    }
    let mut iter = z.iter_from(start, reverse);
    if offset > 0 && iter.nth(offset as usize - 1).is_none() {
        return Vec::new();
    }
    let limit = if limit < 0 {
        usize::MAX
    } else {
        limit as usize
    };
    iter.take(limit)
        .take_while(|(m, s)| {
            if reverse {
                range.gte_min(*s, m)
            } else {
                range.lte_max(*s, m)
            }
        })
        .collect()
}

/// `zrangeGenericCommand`: `argv[key_idx]` is the source key, followed by
/// min, max and the options.
fn zrange_generic(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    key_idx: usize,
    store: Option<&[u8]>,
    mut range_type: RangeType,
    mut direction: Direction,
) -> CmdResult {
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut j = key_idx + 3;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        if store.is_none() && is(argv[j], "withscores") {
            withscores = true;
        } else if is(argv[j], "limit") && left >= 2 {
            offset = parse_int(argv[j + 1])?;
            limit = parse_int(argv[j + 2])?;
            j += 2;
        } else if direction == Direction::Auto && is(argv[j], "rev") {
            direction = Direction::Reverse;
        } else if range_type == RangeType::Auto && is(argv[j], "bylex") {
            range_type = RangeType::Lex;
        } else if range_type == RangeType::Auto && is(argv[j], "byscore") {
            range_type = RangeType::Score;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    if direction == Direction::Auto {
        direction = Direction::Forward;
    }
    if range_type == RangeType::Auto {
        range_type = RangeType::Rank;
    }
    // Redis uses -1 as "no LIMIT", so an explicit `LIMIT x -1` passes here.
    if limit != -1 && range_type == RangeType::Rank {
        return Err(Reply::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && range_type == RangeType::Lex {
        return Err(Reply::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let reverse = direction == Direction::Reverse;
    let (mut min_arg, mut max_arg) = (argv[key_idx + 1], argv[key_idx + 2]);
    if reverse && range_type != RangeType::Rank {
        // Given as `max min`.
        std::mem::swap(&mut min_arg, &mut max_arg);
    }
    enum Parsed<'a> {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange<'a>),
    }
    let parsed = match range_type {
        RangeType::Score => Parsed::Score(parse_score_range(min_arg, max_arg)?),
        RangeType::Lex => Parsed::Lex(parse_lex_range(min_arg, max_arg)?),
        _ => {
            let start = parse_int(min_arg)?;
            let end = parse_int(max_arg)?;
            Parsed::Rank(start, end)
        }
    };
    let resp3 = is_resp3(ctx);
    let Some(z) = ctx.read_zset(argv[key_idx])? else {
        return Ok(match store {
            Some(dst) => store_result(ctx, dst, Vec::new(), "zrangestore"),
            None => Reply::Array(Vec::new()),
        });
    };
    let selected: Vec<(&[u8], f64)> = match parsed {
        Parsed::Rank(start, end) => match clamp_rank_range(start, end, z.len()) {
            None => Vec::new(),
            Some((start, end)) => {
                let from = if reverse { z.len() - 1 - start } else { start };
                z.iter_from(from, reverse).take(end - start + 1).collect()
            }
        },
        Parsed::Score(range) => {
            if offset > 0 && offset as u64 >= z.len() as u64 {
                Vec::new()
            } else {
                select_in_range(z, &range, offset, limit, reverse)
            }
        }
        Parsed::Lex(range) => select_in_range(z, &range, offset, limit, reverse),
    };
    match store {
        None => Ok(elements_reply(selected.into_iter(), withscores, resp3)),
        Some(dst) => {
            let mut entries: Vec<(Blob, f64)> = selected
                .into_iter()
                .map(|(m, s)| (Blob::new(m), s))
                .collect();
            if reverse {
                entries.reverse();
            }
            Ok(store_result(ctx, dst, entries, "zrangestore"))
        }
    }
}

// ---------------------------------------------------------------------------
// Reads of single members and counts.

fn zcard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        ctx.read_zset(argv[1])?.map_or(0, |z| z.len() as i64),
    ))
}

fn zscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(
        match ctx.read_zset(argv[1])?.and_then(|z| z.score(argv[2])) {
            Some(score) => Reply::Double(score),
            None => Reply::Null,
        },
    )
}

fn zmscore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let z = ctx.read_zset(argv[1])?;
    let replies = argv[2..]
        .iter()
        .map(|m| match z.and_then(|z| z.score(m)) {
            Some(score) => Reply::Double(score),
            None => Reply::Null,
        })
        .collect();
    Ok(Reply::Array(replies))
}

fn zrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrank_generic(ctx, argv, false)
}

fn zrevrank(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zrank_generic(ctx, argv, true)
}

fn zrank_generic(ctx: &mut Ctx, argv: &[&[u8]], reverse: bool) -> CmdResult {
    let Some(z) = ctx.read_zset(argv[1])? else {
        return Ok(Reply::Null);
    };
    Ok(match z.rank(argv[2]) {
        Some(rank) if reverse => Reply::Int((z.len() - 1 - rank) as i64),
        Some(rank) => Reply::Int(rank as i64),
        None => Reply::Null,
    })
}

fn zcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let range = parse_score_range(argv[2], argv[3])?;
    Ok(Reply::Int(
        ctx.read_zset(argv[1])?
            .map_or(0, |z| z.count_in_range(&range) as i64),
    ))
}

fn zlexcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let range = parse_lex_range(argv[2], argv[3])?;
    Ok(Reply::Int(
        ctx.read_zset(argv[1])?
            .map_or(0, |z| z.count_in_range(&range) as i64),
    ))
}

// ---------------------------------------------------------------------------
// ZSCAN.

fn zscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    use super::keys::{parse_scan_cursor, parse_scan_options, scan_reply, scan_table};
    let cursor = parse_scan_cursor(argv[2])?;
    let Some(z) = ctx.read_zset(argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let options = parse_scan_options(argv, 3)?;
    let mut items = Vec::new();
    if z.is_listpack() {
        // A listpack is returned whole, scores as the listpack holds them.
        for (member, score) in z.iter() {
            if options.matches(member) {
                items.push(Reply::bulk(member));
                items.push(Reply::Bulk(listpack_score_text(score).into_bytes()));
            }
        }
        return Ok(scan_reply(0, items));
    }
    let (cursor, found) = scan_table(cursor, options.count, 2, |cursor, found| {
        z.scan_step(cursor, |m, s| found.push((m.to_vec(), s)))
            .expect("a skiplist-encoded set has a table to scan")
    });
    for (member, score) in found {
        if options.matches(&member) {
            items.push(Reply::Bulk(member));
            items.push(Reply::Bulk(format_g17(score).into_bytes()));
        }
    }
    Ok(scan_reply(cursor, items))
}

// ---------------------------------------------------------------------------
// ZPOPMIN, ZPOPMAX, ZMPOP.

/// Which end of a sorted set a pop takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Lowest scores first (ZPOPMIN).
    Min,
    /// Highest scores first (ZPOPMAX).
    Max,
}

/// Pops up to `count` elements from the sorted set at `key`, in pop order
/// (lowest first for [`End::Min`], highest first for [`End::Max`]),
/// deleting the key when it becomes empty. `Ok(None)` when the key does
/// not exist; WRONGTYPE when it is not a sorted set.
///
/// Counts one change per element and signals the key, but logs nothing:
/// ZPOPMIN/ZPOPMAX are logged as received, and a served BZPOPMIN, BZPOPMAX
/// or BZMPOP logs [`pop_effect`]. Shared with the blocking commands so they
/// change the keyspace exactly as the plain ones do.
pub fn pop(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<(Blob, f64)>>, Reply> {
    let Some(z) = ctx.write_zset(key)? else {
        return Ok(None);
    };
    let len = z.len();
    let take = count.min(len);
    let mut popped = match end {
        End::Min => z.remove_ranks(0, take),
        End::Max => z.remove_ranks(len - take, len),
    };
    if end == End::Max {
        popped.reverse();
    }
    if take > 0 {
        let event = match end {
            End::Min => "zpopmin",
            End::Max => "zpopmax",
        };
        ctx.notify(notify::ZSET, event, key);
        ctx.elements_removed(key, take as u64);
    }
    Ok(Some(popped))
}

/// What Redis propagates for a pop served by BZPOPMIN/BZPOPMAX (`count`
/// `None`: `ZPOPMIN key`) or by ZMPOP/BZMPOP (`ZPOPMIN key <popped>`).
pub fn pop_effect(key: &[u8], end: End, count: Option<usize>) -> Vec<Vec<u8>> {
    let name: &[u8] = match end {
        End::Min => b"ZPOPMIN",
        End::Max => b"ZPOPMAX",
    };
    let mut argv = vec![name.to_vec(), key.to_vec()];
    if let Some(count) = count {
        argv.push(count.to_string().into_bytes());
    }
    argv
}

fn zpopmin(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zpop_command(ctx, argv, End::Min)
}

fn zpopmax(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    zpop_command(ctx, argv, End::Max)
}

fn zpop_command(ctx: &mut Ctx, argv: &[&[u8]], end: End) -> CmdResult {
    if argv.len() > 3 {
        return syntax_error();
    }
    let count = match argv.get(2) {
        Some(arg) => Some(parse_long_in(
            arg,
            0,
            LONG_MAX,
            "ERR value is out of range, must be positive",
        )?),
        None => None,
    };
    // RESP3 nests [member, score] pairs only when COUNT was given.
    let nested = is_resp3(ctx) && count.is_some();
    generic_zpop(ctx, argv[1], end, count, nested)
}

/// The first of `keys` that exists, when it holds a sorted set (Redis
/// never keeps an empty one); WRONGTYPE when the first existing key holds
/// another type. As `genericZpopCommand`, keys after it are not looked at.
fn first_zset<'k>(ctx: &mut Ctx, keys: &[&'k [u8]]) -> Result<Option<&'k [u8]>, Reply> {
    for &key in keys {
        match ctx.lookup_write(key) {
            None => continue,
            Some(Value::ZSet(_)) => return Ok(Some(key)),
            Some(_) => return Err(Reply::err(WRONGTYPE)),
        }
    }
    Ok(None)
}

/// Pops up to `count` (at least 1) elements from the sorted set at `key`,
/// which exists, as reply items: flat `member, score` or, when `nested`,
/// `[member, score]` pairs.
fn pop_items(ctx: &mut Ctx, key: &[u8], end: End, count: usize, nested: bool) -> Vec<Reply> {
    let popped = match pop(ctx, key, end, count) {
        Ok(Some(popped)) => popped,
        _ => panic!("the key was just found holding a sorted set"),
    };
    let mut items = Vec::with_capacity(if nested {
        popped.len()
    } else {
        popped.len() * 2
    });
    for (member, score) in popped {
        let member = Reply::Bulk(member.into_vec());
        if nested {
            items.push(Reply::Array(vec![member, Reply::Double(score)]));
        } else {
            items.push(member);
            items.push(Reply::Double(score));
        }
    }
    items
}

/// ZPOPMIN/ZPOPMAX on one key: an empty array when it is missing or
/// `count` is 0, else the popped elements (nested pairs when `nested`).
fn generic_zpop(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: Option<i64>,
    nested: bool,
) -> CmdResult {
    let Some(key) = first_zset(ctx, &[key])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let count = count.unwrap_or(1);
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    Ok(Reply::Array(pop_items(ctx, key, end, count, nested)))
}

/// Pops up to `count` elements from the first existing key of `keys`, as
/// ZMPOP and BZMPOP do: `[key, [[member, score], ...]]`, logged as
/// `ZPOPMIN/ZPOPMAX key <popped>`. `Ok(None)` when no key exists.
fn mpop_serve(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    end: End,
    count: usize,
) -> Result<Option<Reply>, Reply> {
    let Some(key) = first_zset(ctx, keys)? else {
        return Ok(None);
    };
    let items = pop_items(ctx, key, end, count, true);
    ctx.log(pop_effect(key, end, Some(items.len())));
    Ok(Some(Reply::Array(vec![
        Reply::bulk(key),
        Reply::Array(items),
    ])))
}

/// The parsed arguments of ZMPOP/BZMPOP after the numkeys at `numkeys_at`:
/// `(keys, end, count)`, checked in Redis's order (numkeys, MIN/MAX, then
/// COUNT) so the first failing check picks the error.
fn parse_mpop<'a>(
    argv: &[&'a [u8]],
    numkeys_at: usize,
) -> Result<(Vec<&'a [u8]>, End, usize), Reply> {
    let numkeys = parse_long_in(
        argv[numkeys_at],
        1,
        LONG_MAX,
        "ERR numkeys should be greater than 0",
    )?;
    let where_idx = match usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
    {
        Some(i) if i < argv.len() => i,
        _ => return syntax_error(),
    };
    let end = if is(argv[where_idx], "min") {
        End::Min
    } else if is(argv[where_idx], "max") {
        End::Max
    } else {
        return syntax_error();
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < argv.len() {
        if count.is_none() && is(argv[j], "count") && j + 1 < argv.len() {
            count = Some(parse_long_in(
                argv[j + 1],
                1,
                LONG_MAX,
                "ERR count should be greater than 0",
            )?);
            j += 2;
        } else {
            return syntax_error();
        }
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok((argv[numkeys_at + 1..where_idx].to_vec(), end, count))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
fn zmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(argv, 1)?;
    Ok(mpop_serve(ctx, &keys, end, count)?.unwrap_or(Reply::NullArray))
}

// ---------------------------------------------------------------------------
// BZPOPMIN, BZPOPMAX, BZMPOP.
//
// Each tries to serve the client like its non-blocking counterpart and
// otherwise blocks (see `Ctx::block`). When a key it waits on receives a
// sorted set, the engine runs the handler again with `ctx.ready_key()`
// set: as Redis 7.0 does, it then serves from that key alone, or blocks
// again when another client took the elements first. Served pops are
// logged as Redis propagates them: `ZPOPMIN/ZPOPMAX key` for BZPOPMIN/
// BZPOPMAX, `ZPOPMIN/ZPOPMAX key <popped>` for BZMPOP.

/// The keys a run may serve from: all of `keys` on a first run; on a retry
/// only the ready key, and none when it no longer holds a sorted set
/// (emptied by a client served before, or replaced by another type, which
/// Redis ignores: the client stays blocked).
fn candidate_keys<'k>(ctx: &mut Ctx, keys: &[&'k [u8]]) -> Vec<&'k [u8]> {
    let Some(ready) = ctx.ready_key() else {
        return keys.to_vec();
    };
    let Some(&key) = keys.iter().find(|k| **k == ready) else {
        return Vec::new();
    };
    if matches!(ctx.lookup_write(key), Some(Value::ZSet(_))) {
        vec![key]
    } else {
        Vec::new()
    }
}

/// Blocks on `keys` for a sorted set; a timeout answers a null array.
fn block_on_zsets(ctx: &mut Ctx, keys: &[&[u8]], deadline_ms: Option<i64>) -> CmdResult {
    ctx.block(BlockRequest {
        keys: keys.iter().map(|k| Blob::new(k)).collect(),
        deadline_ms,
        kind: BlockKind::ZSet,
        timeout_reply: Reply::NullArray,
        argv: None,
        wake_on_delete: false,
    })
}

fn bzpopmin(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    blocking_zpop(ctx, argv, End::Min)
}

fn bzpopmax(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    blocking_zpop(ctx, argv, End::Max)
}

/// BZPOPMIN/BZPOPMAX `key [key ...] timeout`: `[key, member, score]` from
/// the first existing sorted set. The timeout is checked before the keys.
fn blocking_zpop(ctx: &mut Ctx, argv: &[&[u8]], end: End) -> CmdResult {
    let keys = &argv[1..argv.len() - 1];
    let deadline_ms = ctx.parse_block_timeout(argv[argv.len() - 1], true)?;
    let candidates = candidate_keys(ctx, keys);
    let Some(key) = first_zset(ctx, &candidates)? else {
        return block_on_zsets(ctx, keys, deadline_ms);
    };
    let mut reply = Vec::with_capacity(3);
    reply.push(Reply::bulk(key));
    reply.extend(pop_items(ctx, key, end, 1, false));
    ctx.log(pop_effect(key, end, None));
    Ok(Reply::Array(reply))
}

/// BZMPOP `timeout numkeys key [key ...] MIN|MAX [COUNT count]`: as ZMPOP,
/// blocking when no key exists. The timeout is checked after the other
/// arguments.
fn bzmpop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (keys, end, count) = parse_mpop(argv, 2)?;
    let deadline_ms = ctx.parse_block_timeout(argv[1], true)?;
    let candidates = candidate_keys(ctx, &keys);
    match mpop_serve(ctx, &candidates, end, count)? {
        Some(reply) => Ok(reply),
        None => block_on_zsets(ctx, &keys, deadline_ms),
    }
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER.

/// Beyond this many elements a reply with repetitions cannot be built in
/// memory; Redis would stream it for hours. Such requests get an error
/// instead of exhausting memory.
const RANDMEMBER_MAX_REPLY: u64 = 1 << 32;

fn zrandmember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() >= 3 {
        let l = match crate::types::num::parse_i64(argv[2]) {
            None => return Err(Reply::err(NOT_INT_ERR)),
            Some(i64::MIN) => {
                return Err(Reply::err(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ))
            }
            Some(l) => l,
        };
        let withscores = match argv.len() {
            3 => false,
            4 if is(argv[3], "withscores") => {
                if !(-LONG_MAX / 2..=LONG_MAX / 2).contains(&l) {
                    return Err(Reply::err("ERR value is out of range"));
                }
                true
            }
            _ => return syntax_error(),
        };
        return zrandmember_with_count(ctx, argv[1], l, withscores);
    }
    if ctx.read_zset(argv[1])?.is_none() {
        return Ok(Reply::Null);
    }
    let (z, rng) = zset_and_rng(ctx, argv[1]);
    Ok(match z.random(rng) {
        Some((member, _)) => Reply::bulk(member),
        None => Reply::Null,
    })
}

/// The sorted set under `key` (which the caller just read, so it exists,
/// has not expired and has the right type) together with the engine's
/// random generator: both live in the engine state, so they are borrowed
/// field by field.
fn zset_and_rng<'c>(ctx: &'c mut Ctx, key: &[u8]) -> (&'c ZSet, &'c mut crate::rand::Rng) {
    let db_index = ctx.session.db;
    let core = &mut *ctx.core;
    let Some(Value::ZSet(z)) = core.keyspace.db(db_index).get(key) else {
        unreachable!("the key was just read as a sorted set");
    };
    (z, &mut core.rng)
}

fn zrandmember_with_count(ctx: &mut Ctx, key: &[u8], l: i64, withscores: bool) -> CmdResult {
    let resp3 = is_resp3(ctx);
    if ctx.read_zset(key)?.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let count = l.unsigned_abs();
    let unique = l >= 0;
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let (z, rng) = zset_and_rng(ctx, key);
    let size = z.len();
    let mut out = Vec::new();
    if !unique || count == 1 {
        // With repetitions, in random order.
        if count > RANDMEMBER_MAX_REPLY {
            return Err(Reply::err("ERR value is out of range"));
        }
        out.reserve((count as usize).min(1 << 20));
        for _ in 0..count {
            let (member, score) = z.random(rng).expect("the set is not empty");
            push_element(&mut out, member, score, withscores, resp3);
        }
        return Ok(Reply::Array(out));
    }
    if count >= size as u64 {
        // The whole set, from the highest score down (Redis's zset
        // iteration order).
        return Ok(elements_reply(
            z.iter_from(size - 1, true),
            withscores,
            resp3,
        ));
    }
    // A uniform sample of distinct ranks (Floyd's algorithm), returned in
    // ascending order.
    let count = count as usize;
    let mut picked = std::collections::BTreeSet::new();
    for j in size - count..size {
        let t = rng.index(j + 1);
        if !picked.insert(t) {
            picked.insert(j);
        }
    }
    for rank in picked {
        let (member, score) = z.get(rank).expect("sampled ranks are in range");
        push_element(&mut out, member, score, withscores, resp3);
    }
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests;
