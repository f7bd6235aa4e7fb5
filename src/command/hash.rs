//! Hash commands: HSET, HSETNX, HGET, HMGET, HMSET, HGETALL, HDEL, HLEN,
//! HEXISTS, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HSTRLEN, HSCAN and
//! HRANDFIELD, with Redis 7.0's replies, errors and logged effects.
//!
//! Everything is logged as received except HINCRBYFLOAT, which Redis
//! propagates as `HSET key field <new value>` so that replicas and AOF
//! replay never redo the floating-point arithmetic.

use std::collections::HashSet;

use super::keys::{parse_scan_cursor, parse_scan_options, scan_reply, scan_table};
use super::{arity_error, is, parse_int, CmdResult, CommandSpec, Ctx, NOT_FLOAT_ERR};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::long_double::Ld;
use crate::types::{num, Blob, EncodingLimits, Hash, Value};

/// A hash command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "hash", handler)
}

/// The hash family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("hset", hset),
    spec("hsetnx", hsetnx),
    spec("hget", hget),
    spec("hmget", hmget),
    spec("hmset", hmset),
    spec("hgetall", hgetall),
    spec("hdel", hdel),
    spec("hlen", hlen),
    spec("hexists", hexists),
    spec("hkeys", hkeys),
    spec("hvals", hvals),
    spec("hincrby", hincrby),
    spec("hincrbyfloat", hincrbyfloat),
    spec("hstrlen", hstrlen),
    spec("hscan", hscan),
    spec("hrandfield", hrandfield),
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
    ctx.notify(notify::HASH, "hset", key);
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
        ctx.notify(notify::HASH, "hset", key);
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
        ctx.notify(notify::HASH, "hdel", key);
        ctx.elements_removed(key, deleted);
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
/// `event`: the keyspace event of the change.
fn update_field<T>(
    ctx: &mut Ctx,
    key: &[u8],
    field: &[u8],
    event: &str,
    compute: impl FnOnce(Option<&[u8]>) -> Result<(Blob, T), Reply>,
) -> Result<T, Reply> {
    let out = change_hash(ctx, key, |hash, limits| {
        let (value, out) = compute(hash.get(field))?;
        hash.set(field, value, limits);
        Ok(out)
    })?;
    ctx.signal_modified(key);
    ctx.notify(notify::HASH, event, key);
    ctx.dirty(1);
    Ok(out)
}

fn hincrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let incr = parse_int(argv[3])?;
    let new = update_field(ctx, argv[1], argv[2], "hincrby", |current| {
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
    let text = update_field(ctx, key, field, "hincrbyfloat", |current| {
        let current = match current {
            Some(value) => Ld::parse(value).ok_or(Reply::err("ERR hash value is not a float"))?,
            None => Ld::Zero { negative: false },
        };
        let sum = current + incr;
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
    let cursor = parse_scan_cursor(argv[2])?;
    let Some(hash) = ctx.read_hash(argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let options = parse_scan_options(argv, 3)?;
    let (cursor, pairs) = match &**hash {
        // A listpack is small: everything in one call, cursor 0.
        Hash::Listpack(pairs) => (
            0,
            pairs
                .iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect(),
        ),
        Hash::Table(table) => scan_table(cursor, options.count, 2, |cursor, found| {
            table.scan_step(cursor, |field, value| {
                found.push((field.to_vec(), value.to_vec()))
            })
        }),
    };
    let mut items = Vec::new();
    for (field, value) in pairs {
        if options.matches(&field) {
            items.push(Reply::Bulk(field));
            items.push(Reply::Bulk(value));
        }
    }
    Ok(scan_reply(cursor, items))
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
    use crate::command::test_support::{effects, engine, run};
    use crate::Engine;

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
