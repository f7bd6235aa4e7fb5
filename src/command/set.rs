//! Set commands, following Redis 7.0's `t_set.c`.
//!
//! Reply order matters where Redis's is deterministic: an intset iterates
//! in ascending order, and the set-algebra commands build their result as a
//! fresh set (an intset while the result is small and all-integer), so
//! their replies come out sorted exactly when Redis's do.

use super::keys::{parse_scan_cursor, parse_scan_options, scan_reply, scan_table};
use super::{is, parse_int, syntax_error, CmdResult, CommandSpec, Ctx};
use crate::core::notify;
use crate::keyspace::Db;
use crate::rand::Rng;
use crate::reply::Reply;
use crate::types::set::Member;
use crate::types::{Blob, Set, Value, WRONGTYPE};

/// A set command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "set", handler)
}

/// The set family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("sadd", sadd),
    spec("srem", srem),
    spec("smembers", smembers),
    spec("sismember", sismember),
    spec("smismember", smismember),
    spec("scard", scard),
    spec("spop", spop),
    spec("srandmember", srandmember),
    spec("sinter", sinter),
    spec("sintercard", sintercard),
    spec("sunion", sunion),
    spec("sdiff", sdiff),
    spec("sinterstore", sinterstore),
    spec("sunionstore", sunionstore),
    spec("sdiffstore", sdiffstore),
    spec("smove", smove),
    spec("sscan", sscan),
];

/// SPOP with a count pops one by one while the set keeps more than a fifth
/// of the count; otherwise it picks the survivors instead (Redis's
/// `SPOP_MOVE_STRATEGY_MUL`).
const SPOP_MOVE_STRATEGY_MUL: u64 = 5;

/// SRANDMEMBER copies the set and removes random members when the set has
/// at most three times the count (Redis's `SRANDMEMBER_SUB_STRATEGY_MUL`).
const SRANDMEMBER_SUB_STRATEGY_MUL: u64 = 3;

fn bulk(member: Member<'_>) -> Reply {
    Reply::Bulk(member.to_vec())
}

fn max_intset(ctx: &Ctx) -> usize {
    ctx.limits().set_max_intset_entries
}

/// The set under `key` in the selected database together with the random
/// source, for a key already looked up (expiry applied, type checked).
fn set_and_rng<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Option<(&'c mut Set, &'c mut Rng)> {
    let db = ctx.session.db;
    let core = &mut *ctx.core;
    match core.keyspace.db_mut(db).get_mut(key) {
        Some(Value::Set(set)) => Some((set, &mut core.rng)),
        _ => None,
    }
}

/// Looks up every key as Redis's multi-key set commands do: in order, with
/// lazy expiry and hit/miss statistics, failing with WRONGTYPE at the first
/// key that holds something else. Missing keys are fine (empty sets).
fn check_sets(ctx: &mut Ctx, keys: &[&[u8]]) -> Result<(), Reply> {
    for key in keys {
        ctx.read_set(key)?;
    }
    Ok(())
}

/// The sets under `keys` after [`check_sets`] (`None` for a missing key).
fn sets_of<'d>(db: &'d Db, keys: &[&[u8]]) -> Vec<Option<&'d Set>> {
    keys.iter()
        .map(|key| match db.get(key) {
            Some(Value::Set(set)) => Some(&**set),
            _ => None,
        })
        .collect()
}

/// Stores a set-algebra result under `dst` (replacing any value and TTL),
/// or deletes `dst` when the result is empty; replies with the size.
/// `event`: the keyspace event of a stored result.
fn store_result(ctx: &mut Ctx, dst: &[u8], result: Set, event: &str) -> CmdResult {
    let len = result.len();
    if len > 0 {
        ctx.set_key(dst, Value::Set(Box::new(result)), false);
        ctx.notify(notify::SET, event, dst);
        ctx.dirty(1);
    } else if ctx.delete_key(dst) {
        ctx.dirty(1);
    }
    Ok(Reply::Int(len as i64))
}

// ---------------------------------------------------------------------------
// Single-key commands.

fn sadd(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let members = &argv[2..];
    let max = max_intset(ctx);
    let added = match ctx.write_set(key)? {
        Some(set) => members.iter().filter(|m| set.insert(m, max)).count(),
        None => {
            let mut set = Set::for_member(members[0]);
            let added = members.iter().filter(|m| set.insert(m, max)).count();
            ctx.db().insert_new(key, Value::Set(Box::new(set)));
            ctx.notify_new(key);
            added
        }
    };
    if added > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::SET, "sadd", key);
        ctx.dirty(added as u64);
    }
    Ok(Reply::Int(added as i64))
}

fn srem(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let Some(set) = ctx.write_set(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut removed = 0u64;
    for member in &argv[2..] {
        if set.remove(member) {
            removed += 1;
            if set.is_empty() {
                break;
            }
        }
    }
    if removed > 0 {
        ctx.notify(notify::SET, "srem", key);
        ctx.elements_removed(key, removed);
    }
    Ok(Reply::Int(removed as i64))
}

fn smembers(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // SMEMBERS is SINTER of one key in Redis 7.0: a Set reply.
    Ok(match ctx.read_set(argv[1])? {
        Some(set) => Reply::Set(set.iter().map(bulk).collect()),
        None => Reply::Set(Vec::new()),
    })
}

fn sismember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let found = match ctx.read_set(argv[1])? {
        Some(set) => set.contains(argv[2]),
        None => false,
    };
    Ok(Reply::Int(i64::from(found)))
}

fn smismember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let set = ctx.read_set(argv[1])?;
    let replies = argv[2..]
        .iter()
        .map(|m| Reply::Int(i64::from(set.is_some_and(|s| s.contains(m)))))
        .collect();
    Ok(Reply::Array(replies))
}

fn scard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        ctx.read_set(argv[1])?.map_or(0, |s| s.len() as i64),
    ))
}

fn smove(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (src, dst, member) = (argv[1], argv[2], argv[3]);
    // Both keys are looked up (and expired) before any type check.
    let src_kind = ctx.lookup_write(src).map(|v| matches!(v, Value::Set(_)));
    let dst_kind = ctx.lookup_write(dst).map(|v| matches!(v, Value::Set(_)));
    match src_kind {
        None => return Ok(Reply::Int(0)),
        Some(false) => return Err(Reply::err(WRONGTYPE)),
        Some(true) => {}
    }
    if dst_kind == Some(false) {
        return Err(Reply::err(WRONGTYPE));
    }
    if src == dst {
        let found = ctx.write_set(src)?.is_some_and(|s| s.contains(member));
        return Ok(Reply::Int(i64::from(found)));
    }
    let removed = ctx.write_set(src)?.is_some_and(|s| s.remove(member));
    if !removed {
        return Ok(Reply::Int(0));
    }
    ctx.notify(notify::SET, "srem", src);
    ctx.delete_if_empty(src);
    let max = max_intset(ctx);
    let added = match ctx.write_set(dst)? {
        Some(set) => set.insert(member, max),
        None => {
            let mut set = Set::for_member(member);
            set.insert(member, max);
            ctx.db().insert_new(dst, Value::Set(Box::new(set)));
            ctx.notify_new(dst);
            true
        }
    };
    ctx.signal_modified(src);
    ctx.dirty(1);
    if added {
        ctx.dirty(1);
        ctx.signal_modified(dst);
        ctx.notify(notify::SET, "sadd", dst);
    }
    Ok(Reply::Int(1))
}

// ---------------------------------------------------------------------------
// Random members.

fn spop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match argv.len() {
        2 => {}
        3 => return spop_with_count(ctx, argv),
        _ => return syntax_error(),
    }
    let key = argv[1];
    if ctx.write_set(key)?.is_none() {
        return Ok(Reply::Null);
    }
    let (set, rng) = set_and_rng(ctx, key).expect("key was just found holding a set");
    let member = set.pop_random(rng).expect("a stored set is never empty");
    ctx.notify(notify::SET, "spop", key);
    ctx.elements_removed(key, 1);
    let reply = Reply::Bulk(member.to_vec());
    ctx.log(vec![b"SREM".to_vec(), key.to_vec(), member.into_vec()]);
    Ok(reply)
}

fn spop_with_count(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    // Redis's getPositiveLongFromObjectOrReply: one message for junk and
    // for negatives alike.
    const COUNT_ERR: &str = "ERR value is out of range, must be positive";
    let count = match crate::types::num::parse_i64(argv[2]) {
        Some(n) if n >= 0 => n as u64,
        _ => return Err(Reply::err(COUNT_ERR)),
    };
    let Some(set) = ctx.write_set(key)? else {
        return Ok(Reply::Set(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::Set(Vec::new()));
    }
    let size = set.len() as u64;
    ctx.notify(notify::SET, "spop", key);
    if count >= size {
        // The whole set: Redis replies with the SUNION of the key (so a
        // hash table of integers replies sorted, as a fresh intset would),
        // deletes it and propagates DEL.
        let max = max_intset(ctx);
        let reply = match ctx.read_set(key)? {
            Some(set) => members_as_fresh_set(set, max),
            None => Reply::Set(Vec::new()),
        };
        ctx.delete_key(key);
        ctx.dirty(size);
        ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
        return Ok(reply);
    }
    let max = max_intset(ctx);
    let (set, rng) = set_and_rng(ctx, key).expect("key was just found holding a set");
    let remaining = size - count;
    let popped: Vec<Blob> = if remaining * SPOP_MOVE_STRATEGY_MUL > count {
        (0..count)
            .map(|_| {
                set.pop_random(rng)
                    .expect("count < size leaves members to pop")
            })
            .collect()
    } else {
        // Few survivors: move them to a new set, then the old set's
        // contents (in its iteration order) are the popped members.
        let mut survivors: Option<Set> = None;
        for _ in 0..remaining {
            let member = set.pop_random(rng).expect("survivors < size");
            survivors
                .get_or_insert_with(|| Set::for_member(&member))
                .insert(&member, max);
        }
        let survivors = survivors.expect("count < size leaves at least one survivor");
        let old = std::mem::replace(set, survivors);
        old.iter().map(|m| m.to_blob()).collect()
    };
    ctx.signal_modified(key);
    ctx.dirty(count);
    let reply = Reply::Set(popped.iter().map(|m| Reply::Bulk(m.to_vec())).collect());
    for member in popped {
        ctx.log(vec![b"SREM".to_vec(), key.to_vec(), member.into_vec()]);
    }
    Ok(reply)
}

/// A Set reply with the members of `set` in the order a fresh set built
/// from them iterates: ascending when they all are integers and fit an
/// intset, the table's order otherwise.
fn members_as_fresh_set(set: &Set, max_intset_entries: usize) -> Reply {
    if !matches!(set, Set::Intset(_)) && set.len() <= max_intset_entries.min(1 << 30) {
        let ints: Option<Vec<i64>> = set
            .iter()
            .map(|m| match m {
                Member::Int(v) => Some(v),
                Member::Bytes(b) => crate::types::num::parse_i64(b),
            })
            .collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            return Reply::Set(ints.into_iter().map(|v| bulk(Member::Int(v))).collect());
        }
    }
    Reply::Set(set.iter().map(bulk).collect())
}

fn srandmember(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    match argv.len() {
        2 => {}
        3 => return srandmember_with_count(ctx, argv),
        _ => return syntax_error(),
    }
    let key = argv[1];
    if ctx.read_set(key)?.is_none() {
        return Ok(Reply::Null);
    }
    let (set, rng) = set_and_rng(ctx, key).expect("key was just found holding a set");
    Ok(bulk(set.random(rng).expect("a stored set is never empty")))
}

fn srandmember_with_count(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let count = parse_int(argv[2])?;
    if count == i64::MIN {
        return Err(Reply::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let unique = count >= 0;
    let count = count.unsigned_abs();
    if ctx.read_set(key)?.is_none() || count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let (set, rng) = set_and_rng(ctx, key).expect("key was just found holding a set");
    let set: &Set = set;
    let size = set.len() as u64;
    // Repeats allowed (or a single member): independent draws.
    if !unique || count == 1 {
        let replies = (0..count)
            .map(|_| bulk(set.random(rng).expect("a stored set is never empty")))
            .collect();
        return Ok(Reply::Array(replies));
    }
    // The whole set, in its iteration order.
    if count >= size {
        return Ok(Reply::Array(set.iter().map(bulk).collect()));
    }
    let count = count as usize;
    let picked: Vec<Member> = if count as u64 * SRANDMEMBER_SUB_STRATEGY_MUL > size {
        // Close to the whole set: drop random members from a copy.
        let mut all: Vec<Member> = set.iter().collect();
        while all.len() > count {
            let victim = rng.index(all.len());
            all.swap_remove(victim);
        }
        all
    } else {
        // Much smaller than the set: draw until enough distinct members.
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut picked = Vec::with_capacity(count);
        while picked.len() < count {
            let member = set.random(rng).expect("a stored set is never empty");
            if seen.insert(member) {
                picked.push(member);
            }
        }
        picked
    };
    Ok(Reply::Array(picked.into_iter().map(bulk).collect()))
}

// ---------------------------------------------------------------------------
// Intersection.

/// Calls `visit` for each member of the intersection of `sets` (all
/// present), in the iteration order of the smallest set, until `visit`
/// returns false.
fn for_each_common(sets: &mut [&Set], mut visit: impl FnMut(Member<'_>) -> bool) {
    // Stable, like the merge sort glibc's qsort uses, so that equal-sized
    // sets keep their argument order (it decides the reply order).
    sets.sort_by_key(|s| s.len());
    let (first, others) = sets.split_first().expect("at least one key");
    for member in first.iter() {
        let common = others
            .iter()
            .all(|other| std::ptr::eq(*other, *first) || other.contains_member(member));
        if common && !visit(member) {
            return;
        }
    }
}

/// The sets under `keys`, or `None` when one is missing (an empty
/// intersection).
fn all_sets<'d>(db: &'d Db, keys: &[&[u8]]) -> Option<Vec<&'d Set>> {
    sets_of(db, keys).into_iter().collect()
}

fn sinter(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let keys = &argv[1..];
    check_sets(ctx, keys)?;
    let Some(mut sets) = all_sets(ctx.db(), keys) else {
        return Ok(Reply::Set(Vec::new()));
    };
    let mut out = Vec::new();
    for_each_common(&mut sets, |m| {
        out.push(bulk(m));
        true
    });
    Ok(Reply::Set(out))
}

fn sintercard(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    const NUMKEYS_ERR: &str = "ERR numkeys should be greater than 0";
    let numkeys = crate::types::num::parse_i64(argv[1]).ok_or(Reply::err(NUMKEYS_ERR))?;
    if numkeys < 1 {
        return Err(Reply::err(NUMKEYS_ERR));
    }
    if numkeys > (argv.len() - 2) as i64 {
        return Err(Reply::err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let numkeys = numkeys as usize;
    let mut limit = 0u64;
    let mut i = 2 + numkeys;
    while i < argv.len() {
        if is(argv[i], "limit") && i + 1 < argv.len() {
            const LIMIT_ERR: &str = "ERR LIMIT can't be negative";
            let value = crate::types::num::parse_i64(argv[i + 1]).ok_or(Reply::err(LIMIT_ERR))?;
            if value < 0 {
                return Err(Reply::err(LIMIT_ERR));
            }
            limit = value as u64;
            i += 2;
        } else {
            return syntax_error();
        }
    }
    let keys = &argv[2..2 + numkeys];
    check_sets(ctx, keys)?;
    let Some(mut sets) = all_sets(ctx.db(), keys) else {
        return Ok(Reply::Int(0));
    };
    let mut cardinality = 0u64;
    for_each_common(&mut sets, |_| {
        cardinality += 1;
        limit == 0 || cardinality < limit
    });
    Ok(Reply::Int(cardinality as i64))
}

fn sinterstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (dst, keys) = (argv[1], &argv[2..]);
    check_sets(ctx, keys)?;
    let max = max_intset(ctx);
    let mut result = Set::default();
    if let Some(mut sets) = all_sets(ctx.db(), keys) {
        for_each_common(&mut sets, |m| {
            result.insert_member(m, max);
            true
        });
    }
    store_result(ctx, dst, result, "sinterstore")
}

// ---------------------------------------------------------------------------
// Union and difference.

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Diff,
}

/// The union or difference of `sets` (`None` = missing key), built as a
/// fresh set the way Redis's `sunionDiffGenericCommand` builds it, so the
/// result's encoding (and so its iteration order) is Redis's.
fn union_or_diff(sets: &[Option<&Set>], op: SetOp, max: usize) -> Set {
    let mut result = Set::default();
    if op == SetOp::Union {
        for set in sets.iter().flatten() {
            for member in set.iter() {
                result.insert_member(member, max);
            }
        }
        return result;
    }
    let Some(first) = sets[0] else {
        return result;
    };
    let others = &sets[1..];
    if others.iter().flatten().any(|s| std::ptr::eq(*s, first)) {
        return result;
    }
    // Redis picks the algorithm by estimated work; it matters beyond speed
    // because adding everything first (algorithm 2) may convert the result
    // to a hash table that removals then shrink.
    let present = sets.iter().flatten().count() as u64;
    let algo_one_work = first.len() as u64 * present / 2;
    let algo_two_work: u64 = sets.iter().flatten().map(|s| s.len() as u64).sum();
    if algo_one_work <= algo_two_work {
        for member in first.iter() {
            if !others.iter().flatten().any(|s| s.contains_member(member)) {
                result.insert_member(member, max);
            }
        }
    } else {
        for member in first.iter() {
            result.insert_member(member, max);
        }
        for set in others.iter().flatten() {
            if result.is_empty() {
                break;
            }
            for member in set.iter() {
                result.remove_member(member);
            }
        }
    }
    result
}

fn union_diff_reply(ctx: &mut Ctx, keys: &[&[u8]], op: SetOp) -> CmdResult {
    check_sets(ctx, keys)?;
    let max = max_intset(ctx);
    let sets = sets_of(ctx.db(), keys);
    let result = union_or_diff(&sets, op, max);
    Ok(Reply::Set(result.iter().map(bulk).collect()))
}

fn union_diff_store(ctx: &mut Ctx, dst: &[u8], keys: &[&[u8]], op: SetOp) -> CmdResult {
    check_sets(ctx, keys)?;
    let max = max_intset(ctx);
    let sets = sets_of(ctx.db(), keys);
    let result = union_or_diff(&sets, op, max);
    let event = match op {
        SetOp::Union => "sunionstore",
        SetOp::Diff => "sdiffstore",
    };
    store_result(ctx, dst, result, event)
}

fn sunion(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    union_diff_reply(ctx, &argv[1..], SetOp::Union)
}

fn sdiff(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    union_diff_reply(ctx, &argv[1..], SetOp::Diff)
}

fn sunionstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    union_diff_store(ctx, argv[1], &argv[2..], SetOp::Union)
}

fn sdiffstore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    union_diff_store(ctx, argv[1], &argv[2..], SetOp::Diff)
}

// ---------------------------------------------------------------------------
// SSCAN.

fn sscan(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let cursor = parse_scan_cursor(argv[2])?;
    let Some(set) = ctx.read_set(argv[1])? else {
        return Ok(scan_reply(0, Vec::new()));
    };
    // Options are parsed after the key lookup, as Redis does (a missing key
    // replies an empty scan whatever follows).
    let options = parse_scan_options(argv, 3)?;
    let (cursor, found) = match &**set {
        // An intset or a packed set is small: everything at once, cursor 0.
        Set::Intset(ints) => (0, ints.iter().map(|&v| Member::Int(v).to_vec()).collect()),
        Set::Packed(p) => (0, p.iter().map(|m| m.to_vec()).collect()),
        Set::Table(table) => scan_table(cursor, options.count, 1, |cursor, found| {
            table.scan_step(cursor, |k, _| found.push(k.to_vec()))
        }),
    };
    let elements = found
        .into_iter()
        .filter(|m: &Vec<u8>| options.matches(m))
        .map(Reply::Bulk)
        .collect();
    Ok(scan_reply(cursor, elements))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::test_support::Fixture;

    fn bulks(items: &[&str]) -> Vec<Reply> {
        items.iter().map(|s| Reply::bulk(s.as_bytes())).collect()
    }

    fn sorted_members(reply: Reply) -> Vec<Vec<u8>> {
        let (Reply::Set(items) | Reply::Array(items)) = reply else {
            panic!("not a collection: {reply:?}");
        };
        let mut members: Vec<Vec<u8>> = items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                other => panic!("not a bulk: {other:?}"),
            })
            .collect();
        members.sort();
        members
    }

    #[test]
    fn spop_is_logged_as_srem_of_each_member() {
        let mut f = Fixture::new();
        f.run("SADD s 1 2 3 4 5 6 7 8 9 10");
        f.effects();
        let Reply::Bulk(one) = f.run("SPOP s") else {
            panic!("SPOP replies a bulk")
        };
        let Reply::Set(two) = f.run("SPOP s 2") else {
            panic!("SPOP with count replies a set")
        };
        let mut expected = vec![format!("0: SREM s {}", String::from_utf8_lossy(&one))];
        for m in &two {
            let Reply::Bulk(m) = m else {
                panic!("bulk members")
            };
            expected.push(format!("0: SREM s {}", String::from_utf8_lossy(m)));
        }
        assert_eq!(f.effects(), expected);
        // Few survivors: the other strategy, still one SREM per member.
        let Reply::Set(many) = f.run("SPOP s 6") else {
            panic!("SPOP with count replies a set")
        };
        assert_eq!(many.len(), 6);
        assert_eq!(f.effects().len(), 6);
        assert_eq!(f.run("SCARD s"), Reply::Int(1));
    }

    #[test]
    fn spop_of_the_whole_set_is_logged_as_del() {
        let mut f = Fixture::new();
        f.run("SADD s 3 1 2");
        f.effects();
        assert_eq!(f.run("SPOP s 3"), Reply::Set(bulks(&["1", "2", "3"])));
        assert_eq!(f.effects(), ["0: DEL s"]);
        assert_eq!(f.encoding("s"), None);
        assert_eq!(f.run("SPOP s 3"), Reply::Set(Vec::new()));
        assert_eq!(f.run("SPOP s"), Reply::Null);
        f.run("SADD s x");
        f.effects();
        assert_eq!(f.run("SPOP s"), Reply::bulk(b"x"));
        assert_eq!(f.effects(), ["0: SREM s x"]);
        assert_eq!(f.encoding("s"), None);
    }

    #[test]
    fn spop_whole_table_of_integers_replies_sorted() {
        let mut f = Fixture::new();
        f.run("SADD s 5 x 3 4");
        f.run("SREM s x");
        assert_eq!(f.encoding("s"), Some("hashtable"));
        assert_eq!(f.run("SPOP s 10"), Reply::Set(bulks(&["3", "4", "5"])));
    }

    #[test]
    fn spop_survivor_strategy_rebuilds_the_encoding() {
        let mut f = Fixture::new();
        f.run("SADD s a 1 2 3 4 5 6 7 8 9");
        f.run("SREM s a");
        assert_eq!(f.encoding("s"), Some("hashtable"));
        // remaining 1 * 5 <= 8: the survivors go to a fresh intset.
        f.run("SPOP s 8");
        assert_eq!(f.encoding("s"), Some("intset"));
        assert_eq!(f.run("SCARD s"), Reply::Int(1));
    }

    #[test]
    fn changes_are_logged_as_received_and_no_ops_not_at_all() {
        let mut f = Fixture::new();
        f.run("SADD s a b");
        f.run("SADD s a");
        f.run("SREM s zz");
        f.run("SMOVE s d zz");
        f.run("SMOVE s d a");
        f.run("SINTERSTORE e s missing");
        f.run("SUNIONSTORE e s d");
        f.run("SDIFFSTORE e s s");
        f.run("SPOP s 0");
        assert_eq!(
            f.effects(),
            [
                "0: SADD s a b",
                "0: SMOVE s d a",
                "0: SUNIONSTORE e s d",
                "0: SDIFFSTORE e s s",
            ]
        );
        assert_eq!(f.encoding("e"), None);
    }

    #[test]
    fn store_replaces_any_value_and_ttl() {
        let mut f = Fixture::new();
        f.run("SADD dst v");
        f.run("SADD a 1 2 3");
        f.run("SADD b 2 3 4");
        assert_eq!(f.run("SINTERSTORE dst a b"), Reply::Int(2));
        assert_eq!(f.run("SMEMBERS dst"), Reply::Set(bulks(&["2", "3"])));
        assert_eq!(f.encoding("dst"), Some("intset"));
        assert_eq!(f.run("SDIFFSTORE dst a b"), Reply::Int(1));
        assert_eq!(f.run("SUNIONSTORE dst a b x"), Reply::Int(4));
        assert_eq!(
            f.run("SMEMBERS dst"),
            Reply::Set(bulks(&["1", "2", "3", "4"]))
        );
        assert_eq!(f.run("SINTER a b nope"), Reply::Set(Vec::new()));
        assert_eq!(f.run("SINTERCARD 2 a b LIMIT 1"), Reply::Int(1));
        assert_eq!(f.run("SINTERCARD 2 a b LIMIT 0"), Reply::Int(2));
    }

    #[test]
    fn srandmember_counts() {
        let mut f = Fixture::new();
        f.run("SADD s 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20");
        for count in [1, 3, 7, 19] {
            let members = sorted_members(f.run(&format!("SRANDMEMBER s {count}")));
            let mut distinct = members.clone();
            distinct.dedup();
            assert_eq!(distinct.len(), count);
        }
        let all: Vec<Reply> = (1..=20)
            .map(|i| Reply::bulk(i.to_string().as_bytes()))
            .collect();
        assert_eq!(f.run("SRANDMEMBER s 20"), Reply::Array(all.clone()));
        assert_eq!(f.run("SRANDMEMBER s 100"), Reply::Array(all));
        assert_eq!(sorted_members(f.run("SRANDMEMBER s -50")).len(), 50);
        assert_eq!(f.run("SRANDMEMBER s 0"), Reply::Array(Vec::new()));
        assert_eq!(
            f.effects(),
            ["0: SADD s 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"]
        );
    }

    #[test]
    fn diff_algorithm_two_may_leave_a_table() {
        // 600 integers minus two sets of 100: Redis's work estimate picks
        // add-then-remove, so the result passed through a hash table.
        let mut f = Fixture::new();
        let a: Vec<String> = (0..600).map(|i| i.to_string()).collect();
        f.run(&format!("SADD a {}", a.join(" ")));
        f.run(&format!("SADD b {}", a[..100].join(" ")));
        f.run(&format!("SADD c {}", a[100..200].join(" ")));
        assert_eq!(f.run("SDIFFSTORE d a b c"), Reply::Int(400));
        assert_eq!(f.encoding("d"), Some("hashtable"));
        // With one subtrahend the element-wise algorithm keeps an intset.
        f.run(&format!("SADD e {}", a[..200].join(" ")));
        assert_eq!(f.run("SDIFFSTORE d a e"), Reply::Int(400));
        assert_eq!(f.encoding("d"), Some("intset"));
    }
}
