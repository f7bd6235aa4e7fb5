//! Hash commands: HSET, HSETNX, HGET, HMGET, HMSET, HGETALL, HDEL, HLEN,
//! HEXISTS, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HSTRLEN, HSCAN and
//! HRANDFIELD, with Redis 7.0's replies, errors and logged effects.
//!
//! Everything is logged as received except HINCRBYFLOAT, which Redis
//! propagates as `HSET key field <new value>` so that replicas and AOF
//! replay never redo the floating-point arithmetic.

use std::collections::HashSet;

use self::long_double::Ld;
use super::keys::{parse_scan_cursor, parse_scan_options};
use super::{
    arity_error, flags::*, is, parse_int, CmdResult, CommandSpec, Ctx, Handler, NOT_FLOAT_ERR,
};
use crate::reply::Reply;
use crate::types::{num, Blob, EncodingLimits, Hash, Value};

const fn spec(name: &'static str, arity: i32, flags: u32, handler: Handler) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        group: "hash",
        handler,
        subcommands: &[],
    }
}

/// The hash family's table (arity and flags from Redis 7.0.15's
/// `src/commands/h*.json`).
pub static COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, WRITE | DENYOOM | FAST, hset),
    spec("hsetnx", 4, WRITE | DENYOOM | FAST, hsetnx),
    spec("hget", 3, READONLY | FAST, hget),
    spec("hmget", -3, READONLY | FAST, hmget),
    spec("hmset", -4, WRITE | DENYOOM | FAST, hmset),
    spec("hgetall", 2, READONLY, hgetall),
    spec("hdel", -3, WRITE | FAST, hdel),
    spec("hlen", 2, READONLY | FAST, hlen),
    spec("hexists", 3, READONLY | FAST, hexists),
    spec("hkeys", 2, READONLY, hkeys),
    spec("hvals", 2, READONLY, hvals),
    spec("hincrby", 4, WRITE | DENYOOM | FAST, hincrby),
    spec("hincrbyfloat", 4, WRITE | DENYOOM | FAST, hincrbyfloat),
    spec("hstrlen", 3, READONLY | FAST, hstrlen),
    spec("hscan", -3, READONLY, hscan),
    spec("hrandfield", -2, READONLY, hrandfield),
];

fn hset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let created = set_pairs(ctx, argv, "hset")?;
    Ok(Reply::Int(created as i64))
}

fn hmset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    set_pairs(ctx, argv, "hmset")?;
    Ok(Reply::ok())
}

/// Runs `change` on the hash at `key`, or on a new empty hash stored under
/// `key` afterwards if it is no longer empty. An error from `change` is
/// returned as is: callers fail before changing anything. The caller
/// signals the modification and counts it.
fn change_hash<T>(
    ctx: &mut Ctx,
    key: &[u8],
    change: impl FnOnce(&mut Hash, &EncodingLimits) -> Result<T, Reply>,
) -> Result<T, Reply> {
    let limits = ctx.limits();
    match ctx.write_hash(key)? {
        Some(hash) => change(hash, &limits),
        None => {
            let mut hash = Hash::new();
            let out = change(&mut hash, &limits)?;
            if !hash.is_empty() {
                ctx.set_key(key, Value::Hash(Box::new(hash)), false);
            }
            Ok(out)
        }
    }
}

/// HSET / HMSET: sets every field/value pair; returns how many fields are
/// new.
fn set_pairs(ctx: &mut Ctx, argv: &[&[u8]], name: &str) -> Result<usize, Reply> {
    if argv.len() % 2 == 1 {
        return Err(arity_error(name));
    }
    let key = argv[1];
    let created = change_hash(ctx, key, |hash, limits| {
        hash.convert_for_items(argv[2..].iter().copied(), limits);
        let mut created = 0;
        for pair in argv[2..].chunks_exact(2) {
            created += usize::from(hash.set(pair[0], Blob::new(pair[1]), limits));
        }
        Ok(created)
    })?;
    ctx.signal_modified(key);
    ctx.dirty(((argv.len() - 2) / 2) as u64);
    Ok(created)
}

fn hsetnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, field, value) = (argv[1], argv[2], argv[3]);
    let set = change_hash(ctx, key, |hash, limits| {
        if hash.contains(field) {
            return Ok(false);
        }
        hash.convert_for_items([field, value], limits);
        hash.set(field, Blob::new(value), limits);
        Ok(true)
    })?;
    if set {
        ctx.signal_modified(key);
        ctx.dirty(1);
    }
    Ok(Reply::Int(i64::from(set)))
}

fn hget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match ctx.read_hash(argv[1])?.and_then(|h| h.get(argv[2])) {
        Some(value) => Reply::bulk(value),
        None => Reply::Null,
    })
}

fn hmget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let hash = ctx.read_hash(argv[1])?;
    let values = argv[2..]
        .iter()
        .map(|field| match hash.and_then(|h| h.get(field)) {
            Some(value) => Reply::bulk(value),
            None => Reply::Null,
        })
        .collect();
    Ok(Reply::Array(values))
}

fn hgetall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match ctx.read_hash(argv[1])? {
        Some(hash) => Reply::Map(
            hash.iter()
                .map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)))
                .collect(),
        ),
        None => Reply::Map(Vec::new()),
    })
}

fn hkeys(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match ctx.read_hash(argv[1])? {
        Some(hash) => Reply::Array(hash.iter().map(|(f, _)| Reply::bulk(f)).collect()),
        None => Reply::Array(Vec::new()),
    })
}

fn hvals(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match ctx.read_hash(argv[1])? {
        Some(hash) => Reply::Array(hash.iter().map(|(_, v)| Reply::bulk(v)).collect()),
        None => Reply::Array(Vec::new()),
    })
}

fn hdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(hash) = ctx.write_hash(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut deleted = 0u64;
    for field in &argv[2..] {
        if hash.remove(field) {
            deleted += 1;
            if hash.is_empty() {
                break;
            }
        }
    }
    if deleted > 0 {
        ctx.delete_if_empty(key);
        ctx.signal_modified(key);
        ctx.dirty(deleted);
    }
    Ok(Reply::Int(deleted as i64))
}

fn hlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        ctx.read_hash(argv[1])?.map_or(0, |h| h.len() as i64),
    ))
}

fn hexists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let present = ctx.read_hash(argv[1])?.is_some_and(|h| h.contains(argv[2]));
    Ok(Reply::Int(i64::from(present)))
}

fn hstrlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let len = ctx
        .read_hash(argv[1])?
        .and_then(|h| h.get(argv[2]))
        .map_or(0, |v| v.len());
    Ok(Reply::Int(len as i64))
}

/// Replaces the value of `field` in the hash at `key` (created when
/// absent) with what `compute` makes of the current value, in one lookup.
/// When `compute` fails nothing changes. Returns `compute`'s second result.
fn update_field<T>(
    ctx: &mut Ctx,
    key: &[u8],
    field: &[u8],
    compute: impl FnOnce(Option<&[u8]>) -> Result<(Blob, T), Reply>,
) -> Result<T, Reply> {
    let out = change_hash(ctx, key, |hash, limits| {
        let (value, out) = compute(hash.get(field).map(|v| v.as_bytes()))?;
        hash.set(field, value, limits);
        Ok(out)
    })?;
    ctx.signal_modified(key);
    ctx.dirty(1);
    Ok(out)
}

fn hincrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let incr = parse_int(argv[3])?;
    let new = update_field(ctx, argv[1], argv[2], |current| {
        let current = match current {
            Some(value) => {
                num::parse_i64(value).ok_or(Reply::err("ERR hash value is not an integer"))?
            }
            None => 0,
        };
        let new = current
            .checked_add(incr)
            .ok_or(Reply::err("ERR increment or decrement would overflow"))?;
        Ok((Blob::from_i64(new), new))
    })?;
    Ok(Reply::Int(new))
}

fn hincrbyfloat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, field) = (argv[1], argv[2]);
    let incr = Ld::parse(argv[3]).ok_or(Reply::err(NOT_FLOAT_ERR))?;
    if !incr.is_finite() {
        return Err(Reply::err("ERR value is NaN or Infinity"));
    }
    let text = update_field(ctx, key, field, |current| {
        let current = match current {
            Some(value) => Ld::parse(value).ok_or(Reply::err("ERR hash value is not a float"))?,
            None => Ld::Zero { negative: false },
        };
        let sum = current.add(incr);
        if !sum.is_finite() {
            return Err(Reply::err("ERR increment would produce NaN or Infinity"));
        }
        let text = sum.to_human().into_bytes();
        Ok((Blob::new(&text), text))
    })?;
    ctx.log(vec![
        b"HSET".to_vec(),
        key.to_vec(),
        field.to_vec(),
        text.clone(),
    ]);
    Ok(Reply::Bulk(text))
}

fn hscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut cursor = parse_scan_cursor(argv[2])?;
    let Some(hash) = ctx.read_hash(argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let options = parse_scan_options(argv, 3)?;
    let mut items = Vec::new();
    match &**hash {
        // A listpack is small: everything in one call, cursor 0.
        Hash::Listpack(pairs) => {
            for (field, value) in pairs {
                if options.matches(field) {
                    items.push(Reply::bulk(field));
                    items.push(Reply::bulk(value));
                }
            }
            cursor = 0;
        }
        Hash::Table(table) => {
            // Redis counts fields and values (COUNT · 2) and bounds the
            // buckets visited to ten times that, so a sparse table cannot
            // stall the server.
            let wanted = options.count.saturating_mul(2);
            let mut budget = wanted.saturating_mul(10);
            let mut collected = 0u64;
            loop {
                cursor = table.scan_step(cursor, |field, value| {
                    collected += 2;
                    if options.matches(field) {
                        items.push(Reply::bulk(field));
                        items.push(Reply::bulk(value));
                    }
                });
                if cursor == 0 || budget == 0 || collected >= wanted {
                    break;
                }
                budget -= 1;
            }
        }
    }
    Ok(scan_reply(cursor, items))
}

fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    let mut text = Vec::with_capacity(20);
    num::write_i64(&mut text, cursor as i64);
    Reply::Array(vec![Reply::Bulk(text), Reply::Array(items)])
}

/// `-LONG_MAX/2 ..= LONG_MAX/2`: the counts HRANDFIELD accepts with
/// WITHVALUES (the reply has two entries per field).
const WITHVALUES_COUNT_MAX: i64 = i64::MAX / 2;

fn hrandfield(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // The hash is borrowed from the keyspace while the generator is in
    // use: work on a copy of the generator's state and store it back.
    let mut rng = ctx.rng().clone();
    if argv.len() == 2 {
        let reply = match ctx.read_hash(argv[1])? {
            None => Reply::Null,
            Some(hash) => match hash.random_pair(&mut rng) {
                Some((field, _)) => Reply::bulk(field),
                None => Reply::Null,
            },
        };
        *ctx.rng() = rng;
        return Ok(reply);
    }
    let count = parse_int(argv[2])?;
    if count == i64::MIN {
        return Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let with_values = match argv.len() {
        3 => false,
        // Redis compares with strcasecmp, which stops at a NUL byte.
        4 if is(
            argv[3].split(|&b| b == 0).next().unwrap_or_default(),
            "withvalues",
        ) =>
        {
            true
        }
        _ => return super::syntax_error(),
    };
    if with_values && !(-WITHVALUES_COUNT_MAX..=WITHVALUES_COUNT_MAX).contains(&count) {
        return Err(Reply::err("ERR value is out of range"));
    }
    let shape = PairShape {
        with_values,
        resp3: ctx.session.resp >= 3,
    };
    let reply = match ctx.read_hash(argv[1])? {
        None => Reply::Array(Vec::new()),
        Some(hash) => random_fields(hash, count, shape, &mut rng),
    };
    *ctx.rng() = rng;
    Ok(reply)
}

/// How HRANDFIELD lays out a field (and its value) in its reply.
#[derive(Clone, Copy)]
struct PairShape {
    with_values: bool,
    resp3: bool,
}

impl PairShape {
    /// Appends `field` (and `value`): a flat array in RESP2, one
    /// two-element array per pair in RESP3.
    fn push(self, out: &mut Vec<Reply>, field: &[u8], value: &[u8]) {
        if !self.with_values {
            out.push(Reply::bulk(field));
        } else if self.resp3 {
            out.push(Reply::Array(vec![Reply::bulk(field), Reply::bulk(value)]));
        } else {
            out.push(Reply::bulk(field));
            out.push(Reply::bulk(value));
        }
    }
}

/// HRANDFIELD with a count, following Redis's cases: a negative count, or
/// a count of one, draws with repetition; a count covering the hash
/// returns all of it in hash order; otherwise distinct fields are chosen
/// in one ordered pass (for listpacks, whose order Redis's
/// `lpRandomPairsUnique` keeps, and for tables under three times the
/// count) or by repeated draws.
fn random_fields(hash: &Hash, count: i64, shape: PairShape, rng: &mut crate::rand::Rng) -> Reply {
    let size = hash.len();
    let mut out = Vec::new();
    if count == 0 || size == 0 {
        return Reply::Array(out);
    }
    if count < 0 || count == 1 {
        let draws = count.unsigned_abs();
        // The count comes from the client: reserve a bounded amount and
        // let the vector grow with the reply.
        out.reserve(draws.min(4096) as usize);
        for _ in 0..draws {
            let (field, value) = hash.random_pair(rng).expect("hash is not empty");
            shape.push(&mut out, field, value);
        }
        return Reply::Array(out);
    }
    let count = count as u64;
    if count >= size as u64 {
        for (field, value) in hash.iter() {
            shape.push(&mut out, field, value);
        }
        return Reply::Array(out);
    }
    let count = count as usize;
    if matches!(hash, Hash::Listpack(_)) || count * 3 > size {
        // Selection sampling: each element is taken with probability
        // (still needed) / (still unseen), which yields exactly `count`.
        let mut needed = count;
        for (seen, (field, value)) in hash.iter().enumerate() {
            if needed == 0 {
                break;
            }
            if rng.index(size - seen) < needed {
                shape.push(&mut out, field, value);
                needed -= 1;
            }
        }
        return Reply::Array(out);
    }
    let mut picked: HashSet<&[u8]> = HashSet::with_capacity(count);
    while picked.len() < count {
        let (field, value) = hash.random_pair(rng).expect("hash is not empty");
        if picked.insert(field) {
            shape.push(&mut out, field, value);
        }
    }
    Reply::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Effect, Engine, Session};

    fn engine() -> (Engine, Session) {
        let mut engine = Engine::open(Config::in_memory()).expect("an in-memory config is valid");
        let session = engine.new_session();
        (engine, session)
    }

    fn run(engine: &mut Engine, session: &mut Session, line: &str) -> Reply {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        engine.execute(session, &argv)
    }

    fn effects(engine: &mut Engine) -> Vec<String> {
        engine
            .take_effects()
            .into_iter()
            .map(|Effect { db, argv }| {
                let words: Vec<String> = argv
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                format!("{db}: {}", words.join(" "))
            })
            .collect()
    }

    fn bulks(items: &[&str]) -> Reply {
        Reply::Array(items.iter().map(|i| Reply::bulk(i.as_bytes())).collect())
    }

    fn encoding(engine: &mut Engine, key: &str) -> &'static str {
        let value = engine
            .core()
            .keyspace
            .db(0)
            .get(key.as_bytes())
            .map(|v| v.encoding());
        value.expect("key exists")
    }

    #[test]
    fn writes_are_logged_as_received() {
        let (mut e, mut s) = engine();
        assert_eq!(run(&mut e, &mut s, "HSET h a 1 b 2"), Reply::Int(2));
        assert_eq!(run(&mut e, &mut s, "HSET h a 3"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "HMSET h c 4"), Reply::ok());
        assert_eq!(run(&mut e, &mut s, "HSETNX h c 5"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "HSETNX h d 5"), Reply::Int(1));
        assert_eq!(run(&mut e, &mut s, "HINCRBY h n -7"), Reply::Int(-7));
        assert_eq!(run(&mut e, &mut s, "HDEL h zz"), Reply::Int(0));
        assert_eq!(run(&mut e, &mut s, "HDEL h a zz b"), Reply::Int(2));
        assert_eq!(
            effects(&mut e),
            vec![
                "0: HSET h a 1 b 2",
                "0: HSET h a 3",
                "0: HMSET h c 4",
                "0: HSETNX h d 5",
                "0: HINCRBY h n -7",
                "0: HDEL h a zz b",
            ]
        );
    }

    #[test]
    fn hincrbyfloat_is_logged_as_hset_of_the_result() {
        let (mut e, mut s) = engine();
        assert_eq!(
            run(&mut e, &mut s, "HINCRBYFLOAT h f 0.1"),
            Reply::bulk(b"0.1")
        );
        assert_eq!(
            run(&mut e, &mut s, "HINCRBYFLOAT h f 0.2"),
            Reply::bulk(b"0.3")
        );
        assert_eq!(
            run(&mut e, &mut s, "HINCRBYFLOAT h f 1e3"),
            Reply::bulk(b"1000.29999999999999999")
        );
        assert_eq!(
            effects(&mut e),
            vec![
                "0: HSET h f 0.1",
                "0: HSET h f 0.3",
                "0: HSET h f 1000.29999999999999999"
            ]
        );
    }

    #[test]
    fn errors_change_nothing_and_log_nothing() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "SET str x");
        run(
            &mut e,
            &mut s,
            "HSET h s abc big 9223372036854775807 inf inf",
        );
        e.take_effects();
        let wrongtype = Reply::err(crate::types::WRONGTYPE);
        for (line, reply) in [
            ("HSET str a b", wrongtype.clone()),
            ("HSET h a", arity_error("hset")),
            ("HMSET h a", arity_error("hmset")),
            (
                "HINCRBY h s 1",
                Reply::err("ERR hash value is not an integer"),
            ),
            (
                "HINCRBY h big 1",
                Reply::err("ERR increment or decrement would overflow"),
            ),
            ("HINCRBY h s x", Reply::err(super::super::NOT_INT_ERR)),
            (
                "HINCRBYFLOAT h s 1",
                Reply::err("ERR hash value is not a float"),
            ),
            (
                "HINCRBYFLOAT h inf 1",
                Reply::err("ERR increment would produce NaN or Infinity"),
            ),
            (
                "HINCRBYFLOAT h s inf",
                Reply::err("ERR value is NaN or Infinity"),
            ),
            ("HINCRBYFLOAT new f x", Reply::err(NOT_FLOAT_ERR)),
            ("HINCRBY new f x", Reply::err(super::super::NOT_INT_ERR)),
            ("HDEL str a", wrongtype.clone()),
            ("HGET str a", wrongtype),
        ] {
            assert_eq!(run(&mut e, &mut s, line), reply, "{line}");
        }
        assert!(effects(&mut e).is_empty());
        assert_eq!(run(&mut e, &mut s, "EXISTS new"), Reply::Int(0));
    }

    #[test]
    fn hdel_of_the_last_field_deletes_the_key() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "HSET h a 1");
        assert_eq!(run(&mut e, &mut s, "HDEL h a a"), Reply::Int(1));
        assert!(e.core().keyspace.db(0).get(b"h").is_none());
    }

    #[test]
    fn small_hash_replies_in_listpack_order() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "HSET h a 1 b 2 c 3");
        run(&mut e, &mut s, "HDEL h a");
        run(&mut e, &mut s, "HSET h a 4 b 5");
        assert_eq!(run(&mut e, &mut s, "HKEYS h"), bulks(&["b", "c", "a"]));
        assert_eq!(run(&mut e, &mut s, "HVALS h"), bulks(&["5", "3", "4"]));
        assert_eq!(
            run(&mut e, &mut s, "HSCAN h 0 MATCH [ab]"),
            Reply::Array(vec![Reply::bulk(b"0"), bulks(&["b", "5", "a", "4"])])
        );
        assert_eq!(
            run(&mut e, &mut s, "HRANDFIELD h 3"),
            bulks(&["b", "c", "a"])
        );
        assert_eq!(
            run(&mut e, &mut s, "HRANDFIELD h 10 WITHVALUES"),
            bulks(&["b", "5", "c", "3", "a", "4"])
        );
    }

    #[test]
    fn encoding_converts_past_the_listpack_limits() {
        let (mut e, mut s) = engine();
        let max_entries = e.config().limits.hash_max_listpack_entries;
        for i in 0..max_entries {
            run(&mut e, &mut s, &format!("HSET h f{i} v"));
        }
        assert_eq!(encoding(&mut e, "h"), "listpack");
        run(&mut e, &mut s, "HSET h extra v");
        assert_eq!(encoding(&mut e, "h"), "hashtable");

        let long = "x".repeat(65);
        run(&mut e, &mut s, &format!("HSET v a {}", &long[..64]));
        assert_eq!(encoding(&mut e, "v"), "listpack");
        run(&mut e, &mut s, &format!("HSETNX v b {long}"));
        assert_eq!(encoding(&mut e, "v"), "hashtable");
        run(&mut e, &mut s, &format!("HINCRBY i {long} 1"));
        assert_eq!(encoding(&mut e, "i"), "hashtable");
    }

    #[test]
    fn hscan_of_a_table_visits_every_field() {
        let (mut e, mut s) = engine();
        for i in 0..500 {
            run(&mut e, &mut s, &format!("HSET h f{i} {i}"));
        }
        let mut seen = HashSet::new();
        let mut cursor = b"0".to_vec();
        loop {
            let line = format!("HSCAN h {} COUNT 7", String::from_utf8_lossy(&cursor));
            let Reply::Array(parts) = run(&mut e, &mut s, &line) else {
                panic!("HSCAN replies with an array");
            };
            let [Reply::Bulk(next), Reply::Array(items)] = &parts[..] else {
                panic!("HSCAN replies with a cursor and items");
            };
            for pair in items.chunks(2) {
                let (Reply::Bulk(f), Reply::Bulk(v)) = (&pair[0], &pair[1]) else {
                    panic!("fields and values are bulks");
                };
                assert_eq!(f[1..], v[..], "value follows its field");
                seen.insert(f.clone());
            }
            cursor = next.clone();
            if cursor == b"0" {
                break;
            }
        }
        assert_eq!(seen.len(), 500);
    }

    #[test]
    fn hrandfield_shapes() {
        let (mut e, mut s) = engine();
        run(&mut e, &mut s, "HSET h a 1 b 2 c 3 d 4 e 5");
        for line in [
            "HRANDFIELD h -20",
            "HRANDFIELD h 2",
            "HRANDFIELD h 4",
            "HRANDFIELD h 1",
        ] {
            let Reply::Array(items) = run(&mut e, &mut s, line) else {
                panic!("{line} replies with an array");
            };
            let wanted: usize = line
                .rsplit(' ')
                .next()
                .and_then(|n| n.trim_start_matches('-').parse().ok())
                .unwrap_or(0);
            assert_eq!(items.len(), wanted, "{line}");
            let distinct: HashSet<_> = items.iter().map(|i| format!("{i:?}")).collect();
            if !line.contains('-') {
                assert_eq!(distinct.len(), wanted, "{line}: distinct fields");
            }
        }
        let Reply::Array(items) = run(&mut e, &mut s, "HRANDFIELD h -3 WITHVALUES") else {
            panic!("an array");
        };
        assert_eq!(items.len(), 6);
        s.resp = 3;
        let Reply::Array(items) = run(&mut e, &mut s, "HRANDFIELD h 2 WITHVALUES") else {
            panic!("an array");
        };
        assert_eq!(items.len(), 2);
        assert!(items
            .iter()
            .all(|i| matches!(i, Reply::Array(pair) if pair.len() == 2)));
        assert_eq!(
            run(&mut e, &mut s, "HRANDFIELD h 0"),
            Reply::Array(Vec::new())
        );
        assert_eq!(run(&mut e, &mut s, "HRANDFIELD nokey"), Reply::Null);
        assert_eq!(
            run(&mut e, &mut s, "HRANDFIELD nokey 3"),
            Reply::Array(Vec::new())
        );
    }
}

/// The x87 80-bit `long double` arithmetic HINCRBYFLOAT uses.
///
/// Redis parses the stored value and the increment with `strtold`, adds
/// them as `long double` (64-bit mantissa on x86-64) and prints the sum
/// with `%.17Lf`. Doing the same in `f64` gives different bytes for very
/// common inputs (`0.1` then `0.2` is `0.3` in Redis and
/// `0.30000000000000004` in `f64`), and a different range (`1e308 + 1e308`
/// is finite in Redis). So this emulates the format exactly: correctly
/// rounded parsing, round-half-even addition, subnormals, and exact
/// decimal printing, with a small big-integer helper for the decimal
/// conversions.
mod long_double {
    use std::cmp::Ordering;

    /// Exponent of the least significant mantissa bit of the smallest
    /// normal (and of every subnormal): 2^-16382 = 2^63 · 2^-16445.
    const MIN_EXP: i64 = -16445;
    /// Exponent of the least significant bit of the largest finite value,
    /// (2^64 - 1) · 2^16320.
    const MAX_EXP: i64 = 16320;
    /// `strtold` is given at most this many bytes by Redis (`string2ld`
    /// refuses longer strings: `MAX_LONG_DOUBLE_CHARS`).
    const MAX_CHARS: usize = 5 * 1024;

    /// A `long double` value.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub(super) enum Ld {
        /// ±0.
        Zero { negative: bool },
        /// ±mantissa · 2^exp; the mantissa has its top bit set unless the
        /// value is subnormal (then `exp` is `MIN_EXP`).
        Finite {
            negative: bool,
            mantissa: u64,
            exp: i64,
        },
        /// ±infinity.
        Inf { negative: bool },
        /// Not a number.
        Nan,
    }

    impl Ld {
        /// True for zero and finite values.
        pub(super) fn is_finite(self) -> bool {
            matches!(self, Ld::Zero { .. } | Ld::Finite { .. })
        }

        /// Rounds ±(`mag` + a fraction that is non-zero iff `sticky`) ·
        /// 2^`exp` to the nearest value (ties to even).
        fn round(negative: bool, mag: u128, exp: i64, sticky: bool) -> Ld {
            if mag == 0 {
                // Only reached with sticky set for values far below the
                // smallest subnormal, which round to zero.
                return Ld::Zero { negative };
            }
            let bits = i64::from(128 - mag.leading_zeros());
            let mut shift = bits - 64;
            if exp + shift < MIN_EXP {
                shift = MIN_EXP - exp;
            }
            let (mut kept, mut new_exp) = if shift <= 0 {
                debug_assert!(
                    !sticky,
                    "callers give at least 66 significant bits with a sticky fraction"
                );
                (mag << (-shift), exp + shift)
            } else {
                let kept = if shift >= 128 { 0 } else { mag >> shift };
                let rest = if shift >= 128 {
                    mag
                } else {
                    mag & ((1u128 << shift) - 1)
                };
                let round_up = if shift > 128 {
                    false
                } else {
                    let half = 1u128 << (shift - 1);
                    rest > half || (rest == half && (sticky || kept & 1 == 1))
                };
                (kept + u128::from(round_up), exp + shift)
            };
            if kept >> 64 != 0 {
                kept >>= 1;
                new_exp += 1;
            }
            if kept == 0 {
                return Ld::Zero { negative };
            }
            if new_exp > MAX_EXP {
                return Ld::Inf { negative };
            }
            Ld::Finite {
                negative,
                mantissa: kept as u64,
                exp: new_exp,
            }
        }

        /// `self + other`, rounded to nearest (x87 in extended precision).
        pub(super) fn add(self, other: Ld) -> Ld {
            match (self, other) {
                (Ld::Nan, _) | (_, Ld::Nan) => Ld::Nan,
                (Ld::Inf { negative: a }, Ld::Inf { negative: b }) => {
                    if a == b {
                        self
                    } else {
                        Ld::Nan
                    }
                }
                (Ld::Inf { .. }, _) => self,
                (_, Ld::Inf { .. }) => other,
                (Ld::Zero { negative: a }, Ld::Zero { negative: b }) => {
                    Ld::Zero { negative: a && b }
                }
                (Ld::Zero { .. }, _) => other,
                (_, Ld::Zero { .. }) => self,
                (
                    Ld::Finite {
                        negative: na,
                        mantissa: ma,
                        exp: ea,
                    },
                    Ld::Finite {
                        negative: nb,
                        mantissa: mb,
                        exp: eb,
                    },
                ) => {
                    let ((na, ma, ea), (nb, mb, eb)) = if ea >= eb {
                        ((na, ma, ea), (nb, mb, eb))
                    } else {
                        ((nb, mb, eb), (na, ma, ea))
                    };
                    // 62 guard bits below both mantissas; the smaller one is
                    // aligned and whatever falls off is jammed into bit 0,
                    // far below the rounding position.
                    const GUARD: u32 = 62;
                    let a = u128::from(ma) << GUARD;
                    let d = ea - eb;
                    let b_full = u128::from(mb) << GUARD;
                    let b = if d >= 126 {
                        1
                    } else {
                        let shifted = b_full >> d;
                        let lost = b_full & ((1u128 << d) - 1) != 0;
                        shifted | u128::from(lost)
                    };
                    let exp = ea - i64::from(GUARD);
                    if na == nb {
                        Ld::round(na, a + b, exp, false)
                    } else {
                        match a.cmp(&b) {
                            Ordering::Equal => Ld::Zero { negative: false },
                            Ordering::Greater => Ld::round(na, a - b, exp, false),
                            Ordering::Less => Ld::round(nb, b - a, exp, false),
                        }
                    }
                }
            }
        }

        /// Parses `s` as Redis's `string2ld` does: all of it must be a
        /// number for `strtold` (no leading space); NaN, and results that
        /// overflow or underflow to zero, are refused.
        pub(super) fn parse(s: &[u8]) -> Option<Ld> {
            if s.is_empty() || s.len() >= MAX_CHARS || is_c_space(s[0]) {
                return None;
            }
            let (negative, rest) = match s[0] {
                b'-' => (true, &s[1..]),
                b'+' => (false, &s[1..]),
                _ => (false, s),
            };
            if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
                return Some(Ld::Inf { negative });
            }
            if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
                parse_hex(negative, &rest[2..])
            } else {
                parse_decimal(negative, rest)
            }
        }

        /// `%.17Lf` with trailing fractional zeros (and a bare `.`) removed
        /// and `-0` written `0`: Redis's `ld2string` in `LD_STR_HUMAN` mode.
        pub(super) fn to_human(self) -> String {
            let (negative, mantissa, exp) = match self {
                Ld::Zero { .. } => return "0".into(),
                Ld::Inf { negative } => {
                    return if negative {
                        "-inf".into()
                    } else {
                        "inf".into()
                    }
                }
                Ld::Nan => return "nan".into(),
                Ld::Finite {
                    negative,
                    mantissa,
                    exp,
                } => (negative, mantissa, exp),
            };
            let mut out = String::new();
            if exp >= 0 {
                // An integer: no fractional digits to print.
                let mut n = Big::from_u128(u128::from(mantissa));
                n.shl(exp as u64);
                out.push_str(&n.to_decimal());
            } else {
                // mantissa · 10^17 < 2^121: the value in units of 10^-17,
                // rounded half to even as glibc's printf does.
                const SCALE: u128 = 100_000_000_000_000_000;
                let scaled = u128::from(mantissa) * SCALE;
                let shift = -exp;
                let units = if shift >= 128 {
                    0
                } else {
                    let kept = scaled >> shift;
                    let rest = scaled & ((1u128 << shift) - 1);
                    let half = 1u128 << (shift - 1);
                    kept + u128::from(rest > half || (rest == half && kept & 1 == 1))
                };
                out.push_str(&(units / SCALE).to_string());
                let fraction = format!("{:017}", units % SCALE);
                let fraction = fraction.trim_end_matches('0');
                if !fraction.is_empty() {
                    out.push('.');
                    out.push_str(fraction);
                }
            }
            if out == "0" || !negative {
                out
            } else {
                format!("-{out}")
            }
        }
    }

    /// C's `isspace` in the C locale.
    fn is_c_space(b: u8) -> bool {
        matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
    }

    /// Parses the exponent after `e` or `p` (`12`, `-3`, …), which must run to
    /// the end of `s`; saturates far beyond any representable value.
    fn parse_exponent(s: &[u8]) -> Option<i64> {
        let (negative, digits) = match s.first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut value: i64 = 0;
        for &d in digits {
            value = (value * 10 + i64::from(d - b'0')).min(1_000_000_000);
        }
        Some(if negative { -value } else { value })
    }

    /// Splits `digits[.digits][<marker>exponent]`, checking the form.
    /// Returns (integer digits, fraction digits, exponent).
    fn split_number(
        s: &[u8],
        marker: u8,
        is_digit: fn(&u8) -> bool,
    ) -> Option<(&[u8], &[u8], i64)> {
        let int_len = s.iter().take_while(|b| is_digit(b)).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.first() {
            Some(b'.') => {
                let frac_len = rest[1..].iter().take_while(|b| is_digit(b)).count();
                (&rest[1..1 + frac_len], &rest[1 + frac_len..])
            }
            _ => (&rest[..0], rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let exponent = match rest.first() {
            None => 0,
            Some(&c) if c | 0x20 == marker => parse_exponent(&rest[1..])?,
            Some(_) => return None,
        };
        Some((int_part, frac_part, exponent))
    }

    fn parse_hex(negative: bool, s: &[u8]) -> Option<Ld> {
        let (int_part, frac_part, exponent) = split_number(s, b'p', u8::is_ascii_hexdigit)?;
        let mut mag: u128 = 0;
        let mut exp: i64 = exponent;
        let mut sticky = false;
        for (i, &c) in int_part.iter().chain(frac_part).enumerate() {
            let digit = u128::from(char::from(c).to_digit(16).expect("checked hex digit"));
            let in_fraction = i >= int_part.len();
            if mag >> 120 == 0 {
                mag = mag * 16 + digit;
                if in_fraction {
                    exp -= 4;
                }
            } else {
                sticky |= digit != 0;
                if !in_fraction {
                    exp += 4;
                }
            }
        }
        finish(negative, mag, exp, sticky)
    }

    /// Rounds a parsed number. `None` when `strtold` would report ERANGE
    /// with an infinite or zero result (which `string2ld` refuses); exact
    /// zeros are fine. Exponents far outside the range are decided before
    /// rounding so that they cannot overflow.
    fn finish(negative: bool, mag: u128, exp: i64, sticky: bool) -> Option<Ld> {
        if mag == 0 {
            return Some(Ld::Zero { negative });
        }
        if !(MIN_EXP - 256..=MAX_EXP + 128).contains(&exp) {
            return None;
        }
        match Ld::round(negative, mag, exp, sticky) {
            value @ Ld::Finite { .. } => Some(value),
            _ => None,
        }
    }

    fn parse_decimal(negative: bool, s: &[u8]) -> Option<Ld> {
        let (int_part, frac_part, exponent) = split_number(s, b'e', u8::is_ascii_digit)?;
        // value = digits · 10^exp10, without leading or trailing zeros.
        let mut digits: Vec<u8> = int_part.iter().chain(frac_part).copied().collect();
        let mut exp10 = exponent - frac_part.len() as i64;
        let leading = digits.iter().take_while(|&&d| d == b'0').count();
        digits.drain(..leading);
        if digits.is_empty() {
            return Some(Ld::Zero { negative });
        }
        while digits.last() == Some(&b'0') {
            digits.pop();
            exp10 += 1;
        }
        // Decimal exponent of the leading digit decides the hopeless cases
        // (max ≈ 1.19e4932, min subnormal ≈ 3.65e-4951).
        let lead_exp = digits.len() as i64 - 1 + exp10;
        if !(-4952..4933).contains(&lead_exp) {
            return None;
        }
        let mut n = Big::from_decimal(&digits);
        if exp10 >= 0 {
            n.mul_pow10(exp10 as u64);
            let (mag, shift, sticky) = n.top_bits(128);
            return finish(negative, mag, shift, sticky);
        }
        // digits / 10^-exp10: scale so the quotient has about 100 bits.
        let mut divisor = Big::from_u128(1);
        divisor.mul_pow10((-exp10) as u64);
        let k = 100 - (n.bit_len() as i64 - divisor.bit_len() as i64);
        if k >= 0 {
            n.shl(k as u64);
        } else {
            divisor.shl((-k) as u64);
        }
        let (quotient, remainder_nonzero) = n.div_small_quotient(&divisor, 102);
        finish(negative, quotient, -k, remainder_nonzero)
    }

    /// A non-negative big integer, little-endian base 2^32, no trailing
    /// zero limbs.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Big(Vec<u32>);

    impl Big {
        fn from_u128(mut v: u128) -> Big {
            let mut limbs = Vec::new();
            while v != 0 {
                limbs.push(v as u32);
                v >>= 32;
            }
            Big(limbs)
        }

        fn from_decimal(digits: &[u8]) -> Big {
            let mut n = Big(Vec::new());
            for chunk in digits.chunks(9) {
                let mut value = 0u32;
                for &d in chunk {
                    value = value * 10 + u32::from(d - b'0');
                }
                n.mul_add_small(10u32.pow(chunk.len() as u32), value);
            }
            n
        }

        fn is_zero(&self) -> bool {
            self.0.is_empty()
        }

        fn trim(&mut self) {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
        }

        fn mul_add_small(&mut self, factor: u32, addend: u32) {
            let mut carry = u64::from(addend);
            for limb in &mut self.0 {
                let v = u64::from(*limb) * u64::from(factor) + carry;
                *limb = v as u32;
                carry = v >> 32;
            }
            if carry != 0 {
                self.0.push(carry as u32);
            }
            self.trim();
        }

        fn mul_pow10(&mut self, mut e: u64) {
            while e >= 9 {
                self.mul_add_small(1_000_000_000, 0);
                e -= 9;
            }
            if e > 0 {
                self.mul_add_small(10u32.pow(e as u32), 0);
            }
        }

        fn bit_len(&self) -> u64 {
            match self.0.last() {
                None => 0,
                Some(&top) => (self.0.len() as u64) * 32 - u64::from(top.leading_zeros()),
            }
        }

        fn shl(&mut self, bits: u64) {
            if self.is_zero() {
                return;
            }
            let limbs = (bits / 32) as usize;
            let rem = (bits % 32) as u32;
            if rem != 0 {
                let mut carry = 0u32;
                for limb in &mut self.0 {
                    let v = (*limb << rem) | carry;
                    carry = *limb >> (32 - rem);
                    *limb = v;
                }
                if carry != 0 {
                    self.0.push(carry);
                }
            }
            self.0.splice(0..0, std::iter::repeat_n(0, limbs));
        }

        fn shr1(&mut self) {
            let mut carry = 0u32;
            for limb in self.0.iter_mut().rev() {
                let v = (*limb >> 1) | (carry << 31);
                carry = *limb & 1;
                *limb = v;
            }
            self.trim();
        }

        fn bit(&self, i: u64) -> bool {
            let limb = (i / 32) as usize;
            limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
        }

        /// The top `n` (≤ 128) bits as an integer, the shift that scales
        /// them back, and whether any lower bit is set.
        fn top_bits(&self, n: u64) -> (u128, i64, bool) {
            let len = self.bit_len();
            let shift = len.saturating_sub(n);
            let mut top = 0u128;
            for i in (shift..len).rev() {
                top = (top << 1) | u128::from(self.bit(i));
            }
            let sticky = (0..shift).any(|i| self.bit(i));
            (top, shift as i64, sticky)
        }

        fn sub_assign(&mut self, other: &Big) {
            let mut borrow = 0i64;
            for (i, limb) in self.0.iter_mut().enumerate() {
                let o = i64::from(other.0.get(i).copied().unwrap_or(0));
                let mut v = i64::from(*limb) - o - borrow;
                borrow = 0;
                if v < 0 {
                    v += 1 << 32;
                    borrow = 1;
                }
                *limb = v as u32;
            }
            debug_assert!(borrow == 0, "sub_assign needs self >= other");
            self.trim();
        }

        /// `self / divisor` when the quotient is below 2^`bits`, by shift
        /// and subtract; returns it and whether the remainder is non-zero.
        fn div_small_quotient(mut self, divisor: &Big, bits: u64) -> (u128, bool) {
            let mut d = divisor.clone();
            d.shl(bits - 1);
            let mut quotient = 0u128;
            for _ in 0..bits {
                quotient <<= 1;
                if self.cmp(&d) != Ordering::Less {
                    self.sub_assign(&d);
                    quotient |= 1;
                }
                d.shr1();
            }
            (quotient, !self.is_zero())
        }

        fn to_decimal(&self) -> String {
            let mut n = self.clone();
            let mut chunks = Vec::new();
            while !n.is_zero() {
                let mut rem = 0u64;
                for limb in n.0.iter_mut().rev() {
                    let v = (rem << 32) | u64::from(*limb);
                    *limb = (v / 1_000_000_000) as u32;
                    rem = v % 1_000_000_000;
                }
                n.trim();
                chunks.push(rem as u32);
            }
            let mut out = match chunks.pop() {
                None => return "0".into(),
                Some(top) => top.to_string(),
            };
            for chunk in chunks.iter().rev() {
                out.push_str(&format!("{chunk:09}"));
            }
            out
        }
    }

    impl PartialOrd for Big {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }

    impl Ord for Big {
        fn cmp(&self, other: &Self) -> Ordering {
            self.0
                .len()
                .cmp(&other.0.len())
                .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn incr(a: &str, b: &str) -> String {
            let a = Ld::parse(a.as_bytes()).expect("valid a");
            let b = Ld::parse(b.as_bytes()).expect("valid b");
            a.add(b).to_human()
        }

        fn human(s: &str) -> String {
            Ld::parse(s.as_bytes()).expect("valid").to_human()
        }

        #[test]
        fn sums_match_x87_long_double() {
            // Expected values printed by Redis 7.0.15 on x86-64.
            assert_eq!(incr("0.1", "0.2"), "0.3");
            assert_eq!(incr("10.5", "0.1"), "10.6");
            assert_eq!(incr("5.0e3", "2.0e2"), "5200");
            assert_eq!(human("1e308"), "99999999999999999996685879655845645660560099847415567207797047994921734868838061872100126921888539320446747225054013223152134749593960583597420814430196418767959100019603190778663109604507106667939153395788938914560543563061268364901618630217086589253444881623791300855757318142424510452728255046343928578048");
            assert_eq!(incr("1e308", "1e308"), "199999999999999999993371759311691291321120199694831134415594095989843469737676123744200253843777078640893494450108026446304269499187921167194841628860392837535918200039206381557326219209014213335878306791577877829121087126122536729803237260434173178506889763247582601711514636284849020905456510092687857156096");
            assert_eq!(human("0x1p-18"), "0.00000381469726562");
            assert_eq!(human("4e-4951"), "0");
            assert_eq!(human("0x1.000000000000000000001p0"), "1");
            assert_eq!(incr("1", "-1"), "0");
            assert_eq!(incr("-0.1", "0"), "-0.1");
            assert_eq!(incr("0.1", "-0.1"), "0");
            assert_eq!(incr("1.5", "0x1p-1"), "2");
        }

        #[test]
        fn human_format() {
            assert_eq!(human("3.0"), "3");
            assert_eq!(human("-0"), "0");
            assert_eq!(human("1e-18"), "0");
            assert_eq!(human("-1e-18"), "0");
            assert_eq!(human("1.23456789012345678901"), "1.23456789012345679");
            assert_eq!(human("123"), "123");
        }

        #[test]
        fn parse_follows_string2ld() {
            for bad in [
                "",
                " 1",
                "1 ",
                "abc",
                "1e",
                "0x",
                "0x.p1",
                ".",
                "nan",
                "-nan",
                "1e5000",
                "1e-5000",
                "--1",
                "1..2",
                "1e-4951",
                "0x1p-16446",
                "0x1p-16500",
                "1\x002",
            ] {
                assert_eq!(Ld::parse(bad.as_bytes()), None, "{bad:?}");
            }
            for good in [
                "1",
                "+1",
                "-1.5",
                ".5",
                "5.",
                "1e3",
                "1E+3",
                "0x1p3",
                "0X1.8P1",
                "inf",
                "-Infinity",
                "0e999999",
                "2e-4951",
                "1.9e-4951",
                "0x1p-16445",
            ] {
                assert!(Ld::parse(good.as_bytes()).is_some(), "{good:?}");
            }
            assert_eq!(Ld::parse(b"inf"), Some(Ld::Inf { negative: false }));
        }
    }
}
