//! String commands: GET/SET and their variants, counters, ranges, LCS.
//!
//! Behaviour, replies, errors and logged effects follow Redis 7.0.15's
//! `t_string.c`. Where Redis logs something other than the command as
//! received, the handler says so next to the [`Ctx::log`] call.

use super::c_str;
use super::{is, parse_int, CmdResult, CommandSpec, Ctx, NOT_FLOAT_ERR, NOT_INT_ERR};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::long_double::Ld;
use crate::types::{Blob, Value, WRONGTYPE};

/// A string command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "string", handler)
}

/// The string family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("get", get),
    spec("set", set),
    spec("setnx", setnx),
    spec("setex", setex),
    spec("psetex", psetex),
    spec("getset", getset),
    spec("getdel", getdel),
    spec("getex", getex),
    spec("mget", mget),
    spec("mset", mset),
    spec("msetnx", msetnx),
    spec("incr", incr),
    spec("decr", decr),
    spec("incrby", incrby),
    spec("decrby", decrby),
    spec("incrbyfloat", incrbyfloat),
    spec("append", append),
    spec("strlen", strlen),
    spec("getrange", getrange),
    spec("substr", getrange),
    spec("setrange", setrange),
    spec("lcs", lcs),
];

// ---------------------------------------------------------------------------
// Lookups.

/// The live value under `key` for reading, with one table lookup (the GET
/// hot path) and keyspace hit/miss statistics like Redis's `lookupKeyRead`.
fn lookup_value<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Option<&'c Value> {
    if ctx.core.expiry_held() || ctx.core.notifies(notify::KEY_MISS) {
        // Keys past their TTL read as absent there (`Ctx::lookup_read`),
        // which also reports "keymiss".
        return ctx.lookup_read(key);
    }
    ctx.expire_if_needed(key);
    let db = ctx.session.db;
    let toucher = ctx.core.toucher(ctx.now_ms);
    let core = &mut *ctx.core;
    // Found and its access clock updated in one probe.
    let found = core
        .keyspace
        .db_mut(db)
        .get_touching(key, |a| toucher.apply(a));
    if found.is_some() {
        core.stats.keyspace_hits += 1;
    } else {
        core.stats.keyspace_misses += 1;
    }
    found
}

/// [`lookup_value`] for a string: WRONGTYPE for other types.
fn lookup_str<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Blob>, Reply> {
    match lookup_value(ctx, key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s)),
        Some(_) => Err(Reply::err(WRONGTYPE)),
    }
}

/// True when `arg` names option `word` (case-insensitive, C string rules).
fn is_opt(arg: &[u8], word: &str) -> bool {
    is(c_str(arg), word)
}

/// `ERR string exceeds maximum allowed size (proto-max-bulk-len)` unless
/// `size + append` bytes fit in `max_len` (Redis's `checkStringLength`,
/// overflow included).
fn check_string_length(max_len: u64, size: u64, append: u64) -> Result<(), Reply> {
    match size.checked_add(append) {
        Some(total) if total <= max_len => Ok(()),
        _ => Err(Reply::err(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

/// The largest string APPEND and SETRANGE may build: `proto-max-bulk-len`,
/// except while replaying the log, which is obeyed whatever the limit is
/// now (Redis's `mustObeyClient`), so a lowered limit cannot break loading.
fn max_string_len(ctx: &Ctx) -> u64 {
    if ctx.core.loading {
        u64::MAX
    } else {
        ctx.core.config.proto_max_bulk_len
    }
}

/// Decimal bytes of `n` (for logged arguments).
fn int_arg(n: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    crate::types::num::write_i64(&mut out, n);
    out
}

// ---------------------------------------------------------------------------
// SET, GETEX and their options.

/// Option bits of SET and GETEX (Redis's `OBJ_*` flags).
mod opt {
    pub const NX: u32 = 1 << 0;
    pub const XX: u32 = 1 << 1;
    pub const EX: u32 = 1 << 2;
    pub const PX: u32 = 1 << 3;
    pub const KEEPTTL: u32 = 1 << 4;
    pub const GET: u32 = 1 << 5;
    pub const EXAT: u32 = 1 << 6;
    pub const PXAT: u32 = 1 << 7;
    pub const PERSIST: u32 = 1 << 8;
    /// Any way of giving an expire time.
    pub const ANY_EXPIRE: u32 = EX | PX | EXAT | PXAT;
}

/// Parsed SET/GETEX options: flag bits and the expire argument, if any.
struct ExtendedArgs<'a> {
    flags: u32,
    expire: Option<&'a [u8]>,
}

/// Parses SET's (`for_set`) or GETEX's options starting at `argv[start]`,
/// accepting exactly the combinations Redis accepts: an option conflicting
/// with one already given, an option of the other command, or an expire
/// keyword without a value is `ERR syntax error`. A repeated option is
/// allowed (the last expire value wins).
fn parse_extended<'a>(
    argv: &[&'a [u8]],
    start: usize,
    for_set: bool,
) -> Result<ExtendedArgs<'a>, Reply> {
    use opt::*;
    let mut flags = 0u32;
    let mut expire = None;
    let mut j = start;
    while j < argv.len() {
        let arg = argv[j];
        let next = argv.get(j + 1).copied();
        let expire_conflicts = |own: u32| flags & ((KEEPTTL | PERSIST | ANY_EXPIRE) & !own) != 0;
        if for_set && is_opt(arg, "nx") && flags & XX == 0 {
            flags |= NX;
        } else if for_set && is_opt(arg, "xx") && flags & NX == 0 {
            flags |= XX;
        } else if for_set && is_opt(arg, "get") {
            flags |= GET;
        } else if for_set && is_opt(arg, "keepttl") && flags & (PERSIST | ANY_EXPIRE) == 0 {
            flags |= KEEPTTL;
        } else if !for_set && is_opt(arg, "persist") && flags & (KEEPTTL | ANY_EXPIRE) == 0 {
            flags |= PERSIST;
        } else if let Some(unit) = [(EX, "ex"), (PX, "px"), (EXAT, "exat"), (PXAT, "pxat")]
            .into_iter()
            .find(|&(bit, word)| is_opt(arg, word) && !expire_conflicts(bit) && next.is_some())
            .map(|(bit, _)| bit)
        {
            flags |= unit;
            expire = next;
            j += 1;
        } else {
            return super::syntax_error();
        }
        j += 1;
    }
    Ok(ExtendedArgs { flags, expire })
}

/// Converts an expire argument to an absolute Unix time in ms, with
/// Redis's checks (`getExpireMillisecondsOrReply`): the number must be
/// positive, and neither the conversion to ms nor the addition of the
/// current time may overflow. `unit` is one of the `opt::EX…PXAT` bits;
/// `command` names the command in the error.
fn expire_time_ms(ctx: &Ctx, arg: &[u8], unit: u32, command: &str) -> Result<i64, Reply> {
    let value = parse_int(arg)?;
    let invalid = || Reply::error(format!("ERR invalid expire time in '{command}' command"));
    let in_seconds = unit & (opt::EX | opt::EXAT) != 0;
    if value <= 0 || (in_seconds && value > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if in_seconds { value * 1000 } else { value };
    if unit & (opt::EX | opt::PX) != 0 {
        // Both terms are positive, so an overflow is the only way to get a
        // non-positive sum (Redis checks the wrapped result for <= 0).
        ms.checked_add(ctx.now_ms).ok_or_else(invalid)
    } else {
        Ok(ms)
    }
}

/// One SET-like request, as SET, SETNX, SETEX and PSETEX describe it.
struct SetRequest<'a> {
    /// Command name for errors (`set`, `setex`, …).
    command: &'static str,
    key: &'a [u8],
    value: &'a [u8],
    /// `opt::*` bits.
    flags: u32,
    /// The expire argument and its unit bit.
    expire: Option<(&'a [u8], u32)>,
    /// Reply when the value was set (unless GET).
    ok: Reply,
    /// Reply when NX/XX prevented the set (unless GET).
    aborted: Reply,
}

/// The core of SET, SETNX, SETEX and PSETEX (Redis's `setGenericCommand`).
fn set_generic(ctx: &mut Ctx, argv: &[&[u8]], req: SetRequest) -> CmdResult {
    let SetRequest {
        command,
        key,
        value,
        flags,
        expire,
        ok,
        aborted,
    } = req;
    let expire_at_ms = match expire {
        Some((arg, unit)) => Some(expire_time_ms(ctx, arg, unit, command)?),
        None => None,
    };
    // SET … GET replies with the old value (or fails on a non-string)
    // before the NX/XX decision.
    let get_reply = if flags & opt::GET != 0 {
        Some(match lookup_str(ctx, key)? {
            Some(old) => Reply::bulk(old),
            None => Reply::Null,
        })
    } else {
        None
    };
    if flags & (opt::NX | opt::XX) != 0 {
        let found = exists_touching(ctx, key);
        if (flags & opt::NX != 0 && found) || (flags & opt::XX != 0 && !found) {
            return Ok(get_reply.unwrap_or(aborted));
        }
    }
    // With a new expire the old TTL is replaced anyway: keeping it spares
    // removing and re-inserting the expires entry.
    let keep_ttl = flags & opt::KEEPTTL != 0 || expire_at_ms.is_some();
    ctx.set_key(key, Value::Str(Blob::new(value)), keep_ttl);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "set", key);
    if let Some(at_ms) = expire_at_ms {
        ctx.set_expire(key, at_ms);
        ctx.notify(notify::GENERIC, "expire", key);
        // Relative or absolute, the expiry is logged as an absolute time in
        // ms so replaying the log later gives the same deadline.
        ctx.log(vec![
            b"SET".to_vec(),
            key.to_vec(),
            value.to_vec(),
            b"PXAT".to_vec(),
            int_arg(at_ms),
        ]);
    } else if flags & opt::GET != 0 {
        // Logged without its GET option(s), which only shape the reply.
        let logged = argv
            .iter()
            .enumerate()
            .filter(|&(j, arg)| j < 3 || !is_opt(arg, "get"))
            .map(|(_, arg)| arg.to_vec())
            .collect();
        ctx.log(logged);
    }
    Ok(get_reply.unwrap_or(ok))
}

/// The expire argument and its unit, when the flags name one.
fn expire_arg<'a>(args: &ExtendedArgs<'a>) -> Option<(&'a [u8], u32)> {
    args.expire.map(|arg| (arg, args.flags & opt::ANY_EXPIRE))
}

fn get(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(match lookup_str(ctx, argv[1])? {
        Some(s) => Reply::bulk(s),
        None => Reply::Null,
    })
}

fn set(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if argv.len() == 3 {
        // The hot path: no options to parse, nothing to look up first.
        ctx.set_key(argv[1], Value::Str(Blob::new(argv[2])), false);
        ctx.dirty(1);
        ctx.notify(notify::STRING, "set", argv[1]);
        return Ok(Reply::ok());
    }
    let args = parse_extended(argv, 3, true)?;
    let req = SetRequest {
        command: "set",
        key: argv[1],
        value: argv[2],
        flags: args.flags,
        expire: expire_arg(&args),
        ok: Reply::ok(),
        aborted: Reply::Null,
    };
    set_generic(ctx, argv, req)
}

fn setnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = SetRequest {
        command: "setnx",
        key: argv[1],
        value: argv[2],
        flags: opt::NX,
        expire: None,
        ok: Reply::Int(1),
        aborted: Reply::Int(0),
    };
    set_generic(ctx, argv, req)
}

fn setex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = SetRequest {
        command: "setex",
        key: argv[1],
        value: argv[3],
        flags: 0,
        expire: Some((argv[2], opt::EX)),
        ok: Reply::ok(),
        aborted: Reply::Null,
    };
    set_generic(ctx, argv, req)
}

fn psetex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let req = SetRequest {
        command: "psetex",
        key: argv[1],
        value: argv[3],
        flags: 0,
        expire: Some((argv[2], opt::PX)),
        ok: Reply::ok(),
        aborted: Reply::Null,
    };
    set_generic(ctx, argv, req)
}

fn getset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let reply = match lookup_str(ctx, argv[1])? {
        Some(old) => Reply::bulk(old),
        None => Reply::Null,
    };
    ctx.set_key(argv[1], Value::Str(Blob::new(argv[2])), false);
    ctx.dirty(1);
    ctx.notify(notify::STRING, "set", argv[1]);
    // GETSET k v and SET k v have the same effect; Redis logs the latter.
    ctx.log(vec![b"SET".to_vec(), argv[1].to_vec(), argv[2].to_vec()]);
    Ok(reply)
}

fn getdel(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    if lookup_str(ctx, key)?.is_none() {
        return Ok(Reply::Null);
    }
    let Some(Value::Str(value)) = ctx.db().remove(key) else {
        unreachable!("lookup_str just found a string under the key");
    };
    ctx.signal_modified(key);
    ctx.notify(notify::GENERIC, "del", key);
    ctx.dirty(1);
    ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
    Ok(Reply::Bulk(value.into_vec()))
}

fn getex(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let args = parse_extended(argv, 2, false)?;
    let reply = match lookup_str(ctx, key)? {
        Some(value) => Reply::bulk(value),
        None => return Ok(Reply::Null),
    };
    // The expire value is checked only once the key is known to be a
    // string, as Redis does (GETEX missing EX 0 replies nil).
    let expire = match expire_arg(&args) {
        Some((arg, unit)) => Some((expire_time_ms(ctx, arg, unit, "getex")?, unit)),
        None => None,
    };
    match expire {
        Some((at_ms, unit))
            if unit & (opt::EXAT | opt::PXAT) != 0 && ctx.already_expired(at_ms) =>
        {
            // An absolute time already past deletes the key at once.
            ctx.db().remove(key);
            ctx.signal_modified(key);
            ctx.notify(notify::GENERIC, "del", key);
            ctx.dirty(1);
            ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
        }
        Some((at_ms, _)) => {
            ctx.set_expire(key, at_ms);
            ctx.notify(notify::GENERIC, "expire", key);
            ctx.dirty(1);
            ctx.log(vec![b"PEXPIREAT".to_vec(), key.to_vec(), int_arg(at_ms)]);
        }
        // PERSIST on a key without a TTL changes nothing and logs nothing.
        None if args.flags & opt::PERSIST != 0 && ctx.remove_expire(key) => {
            ctx.signal_modified(key);
            ctx.notify(notify::GENERIC, "persist", key);
            ctx.dirty(1);
            ctx.log(vec![b"PERSIST".to_vec(), key.to_vec()]);
        }
        None => {}
    }
    Ok(reply)
}

// ---------------------------------------------------------------------------
// Multi-key commands.

fn mget(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut items = Vec::with_capacity(argv.len() - 1);
    for key in &argv[1..] {
        items.push(match lookup_value(ctx, key) {
            Some(Value::Str(s)) => Reply::bulk(s),
            // MGET answers nil for other types rather than failing.
            _ => Reply::Null,
        });
    }
    Ok(Reply::Array(items))
}

/// [`Ctx::exists`] that touches the key found (its access clock or LFU
/// counter), as the `lookupKeyWrite` of Redis's SET NX/XX and MSETNX does.
fn exists_touching(ctx: &mut Ctx, key: &[u8]) -> bool {
    let found = ctx.exists(key);
    if found {
        let db = ctx.db_index();
        ctx.core.touch(db, key, ctx.now_ms);
    }
    found
}

/// MSET and MSETNX (`nx`).
fn mset_generic(ctx: &mut Ctx, argv: &[&[u8]], nx: bool) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(super::arity_error(if nx { "msetnx" } else { "mset" }));
    }
    if nx
        && argv[1..]
            .chunks_exact(2)
            .any(|pair| exists_touching(ctx, pair[0]))
    {
        return Ok(Reply::Int(0));
    }
    for pair in argv[1..].chunks_exact(2) {
        ctx.set_key(pair[0], Value::Str(Blob::new(pair[1])), false);
        ctx.notify(notify::STRING, "set", pair[0]);
    }
    ctx.dirty((argv.len() as u64 - 1) / 2);
    Ok(if nx { Reply::Int(1) } else { Reply::ok() })
}

fn mset(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    mset_generic(ctx, argv, false)
}

fn msetnx(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    mset_generic(ctx, argv, true)
}

// ---------------------------------------------------------------------------
// Counters.

/// Adds `delta` to the integer under `key` (0 when missing), keeping its
/// TTL, with one lookup when the key exists.
fn incr_decr(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let overflow = || Reply::err("ERR increment or decrement would overflow");
    let new = match ctx.lookup_write(key) {
        Some(Value::Str(s)) => {
            let old = crate::types::num::parse_i64(s).ok_or(Reply::err(NOT_INT_ERR))?;
            let new = old.checked_add(delta).ok_or_else(overflow)?;
            *s = Blob::from_i64(new);
            new
        }
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => {
            ctx.db().insert_new(key, Value::Str(Blob::from_i64(delta)));
            ctx.notify_new(key);
            delta
        }
    };
    ctx.signal_modified(key);
    ctx.notify(notify::STRING, "incrby", key);
    ctx.dirty(1);
    Ok(Reply::Int(new))
}

fn incr(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    incr_decr(ctx, argv[1], 1)
}

fn decr(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    incr_decr(ctx, argv[1], -1)
}

fn incrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let delta = parse_int(argv[2])?;
    incr_decr(ctx, argv[1], delta)
}

fn decrby(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let delta = parse_int(argv[2])?;
    let negated = delta
        .checked_neg()
        .ok_or(Reply::err("ERR decrement would overflow"))?;
    incr_decr(ctx, argv[1], negated)
}

fn incrbyfloat(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let not_float = || Reply::err(NOT_FLOAT_ERR);
    let (current, exists) = match ctx.lookup_write(key) {
        Some(Value::Str(s)) => (Ld::parse(s).ok_or_else(not_float)?, true),
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => (Ld::Zero { negative: false }, false),
    };
    let delta = Ld::parse(argv[2]).ok_or_else(not_float)?;
    let sum = current + delta;
    if !sum.is_finite() {
        return Err(Reply::err("ERR increment would produce NaN or Infinity"));
    }
    let text = sum.to_human().into_bytes();
    if exists {
        // Like Redis's dbOverwrite: the TTL stays.
        ctx.set_key(key, Value::Str(Blob::new(&text)), true);
    } else {
        ctx.db().insert_new(key, Value::Str(Blob::new(&text)));
        ctx.notify_new(key);
        ctx.signal_modified(key);
    }
    ctx.notify(notify::STRING, "incrbyfloat", key);
    ctx.dirty(1);
    // Logged as the resulting value so replay does not depend on float
    // arithmetic or formatting.
    ctx.log(vec![
        b"SET".to_vec(),
        key.to_vec(),
        text.clone(),
        b"KEEPTTL".to_vec(),
    ]);
    Ok(Reply::Bulk(text))
}

// ---------------------------------------------------------------------------
// Ranges and lengths.

fn append(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, tail) = (argv[1], argv[2]);
    let max_len = max_string_len(ctx);
    let new_len = match ctx.lookup_write(key) {
        Some(Value::Str(s)) => {
            check_string_length(max_len, s.len() as u64, tail.len() as u64)?;
            // Reuse the old heap block: `reserve_exact` grows it in place
            // when the allocator can, and leaves no spare capacity for
            // `from_vec` to trim.
            let mut bytes = std::mem::take(s).into_vec();
            bytes.reserve_exact(tail.len());
            bytes.extend_from_slice(tail);
            let len = bytes.len();
            *s = Blob::raw_from_vec(bytes);
            len
        }
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => {
            ctx.db().insert_new(key, Value::Str(Blob::new(tail)));
            ctx.notify_new(key);
            tail.len()
        }
    };
    ctx.signal_modified(key);
    ctx.notify(notify::STRING, "append", key);
    ctx.dirty(1);
    Ok(Reply::Int(new_len as i64))
}

fn strlen(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    Ok(Reply::Int(
        lookup_str(ctx, argv[1])?.map_or(0, |s| s.len() as i64),
    ))
}

fn getrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let mut start = parse_int(argv[2])?;
    let mut end = parse_int(argv[3])?;
    let Some(s) = lookup_str(ctx, argv[1])? else {
        return Ok(Reply::Bulk(Vec::new()));
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::Bulk(Vec::new()));
    }
    // Strings are at most 512 MB, so adding the length cannot overflow.
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        return Ok(Reply::Bulk(Vec::new()));
    }
    Ok(Reply::bulk(&s[start as usize..=end as usize]))
}

fn setrange(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let (key, patch) = (argv[1], argv[3]);
    let offset = parse_int(argv[2])?;
    if offset < 0 {
        return Err(Reply::err("ERR offset is out of range"));
    }
    let max_len = max_string_len(ctx);
    // Past the length check, offset + patch fits in proto-max-bulk-len,
    // so the sums below neither overflow nor allocate without bound.
    let start = offset as usize;
    let new_len = match ctx.lookup_write(key) {
        Some(Value::Str(s)) => {
            // Writing nothing changes nothing, even beyond the end.
            if patch.is_empty() {
                return Ok(Reply::Int(s.len() as i64));
            }
            check_string_length(max_len, offset as u64, patch.len() as u64)?;
            let mut bytes = std::mem::take(s).into_vec();
            if bytes.len() < start + patch.len() {
                bytes.resize(start + patch.len(), 0);
            }
            bytes[start..start + patch.len()].copy_from_slice(patch);
            let len = bytes.len();
            *s = Blob::raw_from_vec(bytes);
            len
        }
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => {
            if patch.is_empty() {
                return Ok(Reply::Int(0));
            }
            check_string_length(max_len, offset as u64, patch.len() as u64)?;
            let mut bytes = vec![0u8; start + patch.len()];
            bytes[start..].copy_from_slice(patch);
            let len = bytes.len();
            ctx.db()
                .insert_new(key, Value::Str(Blob::raw_from_vec(bytes)));
            ctx.notify_new(key);
            len
        }
    };
    ctx.signal_modified(key);
    ctx.notify(notify::STRING, "setrange", key);
    ctx.dirty(1);
    Ok(Reply::Int(new_len as i64))
}

// ---------------------------------------------------------------------------
// LCS.

fn lcs(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let type_error = || Reply::err("ERR The specified keys must contain string values");
    // Both keys are looked up (and expired) before any argument check; a
    // missing key counts as an empty string.
    let mut values = [Vec::new(), Vec::new()];
    let mut all_strings = true;
    for (slot, key) in values.iter_mut().zip(&argv[1..3]) {
        match lookup_value(ctx, key) {
            None => {}
            Some(Value::Str(s)) => *slot = s.to_vec(),
            Some(_) => all_strings = false,
        }
    }
    if !all_strings {
        return Err(type_error());
    }
    let [a, b] = values;

    let mut want_idx = false;
    let mut want_len = false;
    let mut with_match_len = false;
    let mut min_match_len: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let arg = argv[j];
        let more_args = argv.len() - 1 - j;
        if is_opt(arg, "idx") {
            want_idx = true;
        } else if is_opt(arg, "len") {
            want_len = true;
        } else if is_opt(arg, "withmatchlen") {
            with_match_len = true;
        } else if is_opt(arg, "minmatchlen") && more_args > 0 {
            min_match_len = parse_int(argv[j + 1])?.max(0);
            j += 1;
        } else {
            return super::syntax_error();
        }
        j += 1;
    }
    if want_len && want_idx {
        return Err(Reply::err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    lcs_reply(
        ctx,
        &a,
        &b,
        want_idx,
        want_len,
        with_match_len,
        min_match_len,
    )
}

/// Computes the LCS table of `a` and `b` and answers like Redis: the
/// string, its length (LEN), or the matching ranges (IDX). The table and
/// the walk back through it follow the textbook dynamic programme; ties
/// step through `b` first, which decides which of several equally long
/// answers is reported, exactly as Redis reports it.
fn lcs_reply(
    ctx: &Ctx,
    a: &[u8],
    b: &[u8],
    want_idx: bool,
    want_len: bool,
    with_match_len: bool,
    min_match_len: i64,
) -> CmdResult {
    let (alen, blen) = (a.len(), b.len());
    let width = blen + 1;
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    let table_bytes = cells.saturating_mul(4);
    if table_bytes > ctx.core.config.proto_max_bulk_len {
        return Err(Reply::err(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        return Err(Reply::err(
            "ERR Insufficient memory, failed allocating transient memory for LCS",
        ));
    }
    table.resize(cells as usize, 0);
    for i in 1..=alen {
        for j in 1..=blen {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let total = table[alen * width + blen];
    if want_len && !want_idx {
        return Ok(Reply::Int(i64::from(total)));
    }

    let mut result = vec![0u8; total as usize];
    let mut remaining = total as usize;
    let mut matches = Vec::new();
    // The range being extended backwards: (a_start, a_end, b_start, b_end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[remaining - 1] = a[i - 1];
            match &mut range {
                None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                Some(_) => emit = true,
            }
            if range.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            remaining -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * width + j] > table[i * width + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if range.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some((a_start, a_end, b_start, b_end)) = range.take() {
                let match_len = (a_end - a_start + 1) as i64;
                if want_idx && (min_match_len == 0 || match_len >= min_match_len) {
                    let mut entry = vec![
                        Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                        Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                    ];
                    if with_match_len {
                        entry.push(Reply::Int(match_len));
                    }
                    matches.push(Reply::Array(entry));
                }
            }
        }
    }
    if want_idx {
        return Ok(Reply::Map(vec![
            (Reply::bulk(b"matches"), Reply::Array(matches)),
            (Reply::bulk(b"len"), Reply::Int(i64::from(total))),
        ]));
    }
    Ok(Reply::Bulk(result))
}

#[cfg(test)]
mod tests {
    use crate::command::test_support::Fixture;
    use crate::engine::now_ms;
    use crate::reply::Reply;

    /// Asserts a single `SET key value PXAT <ms>` effect with `ms` within
    /// `[low, high]`.
    fn assert_set_pxat(effects: &[String], prefix: &str, low_ms: i64, high_ms: i64) {
        assert_eq!(effects.len(), 1, "{effects:?}");
        let rest = effects[0]
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("{:?} does not start with {prefix:?}", effects[0]));
        let at_ms: i64 = rest.parse().expect("an absolute time in ms");
        assert!(
            (low_ms..=high_ms).contains(&at_ms),
            "{at_ms} not in {low_ms}..={high_ms}"
        );
    }

    #[test]
    fn plain_writes_are_logged_as_received() {
        let mut f = Fixture::new();
        for line in [
            "SET k v",
            "SET k v KEEPTTL XX",
            "SETNX n 1",
            "MSET a 1 b 2",
            "MSETNX c 1 d 2",
            "INCR n",
            "DECRBY n 5",
            "APPEND k tail",
            "SETRANGE k 1 xy",
        ] {
            f.run(line);
            assert_eq!(f.db0_effects(), vec![line.to_string()], "{line}");
        }
    }

    #[test]
    fn commands_that_change_nothing_log_nothing() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.run("SET l 1");
        f.db0_effects();
        for line in [
            "GET k",
            "SET k w NX",
            "SET missing w XX",
            "SETNX k w",
            "MSETNX x 1 k 2",
            "INCR k",
            "INCRBY l 9223372036854775807",
            "INCRBYFLOAT k 1",
            "SETRANGE k 3 ",
            "SETRANGE missing 3 ",
            "GETDEL missing",
            "GETEX k",
            "GETEX k PERSIST",
            "GETEX missing EX 10",
            "SET k v EX 0",
            "STRLEN k",
            "MGET k l",
        ] {
            f.run(line);
            assert_eq!(f.db0_effects(), Vec::<String>::new(), "{line}");
        }
    }

    #[test]
    fn relative_and_absolute_expiry_is_logged_as_set_pxat() {
        let mut f = Fixture::new();
        for (line, prefix, ttl_ms) in [
            ("SET k v EX 100", "SET k v PXAT ", 100_000),
            ("SET nx v PX 2500 NX", "SET nx v PXAT ", 2_500),
            ("SET k v XX GET PX 2500", "SET k v PXAT ", 2_500),
            ("SETEX s 7 val", "SET s val PXAT ", 7_000),
            ("PSETEX p 7 val", "SET p val PXAT ", 7),
        ] {
            f.run("DEL k");
            f.run("SET k old");
            f.db0_effects();
            let before = now_ms();
            let reply = f.run(line);
            let after = now_ms();
            assert!(!reply.is_error(), "{line}: {reply:?}");
            assert_set_pxat(&f.db0_effects(), prefix, before + ttl_ms, after + ttl_ms);
        }
        f.run("SET k v EXAT 4000000000");
        assert_eq!(f.db0_effects(), vec!["SET k v PXAT 4000000000000"]);
        f.run("SET k v PXAT 4000000000123");
        assert_eq!(f.db0_effects(), vec!["SET k v PXAT 4000000000123"]);
    }

    #[test]
    fn set_get_is_logged_without_get() {
        let mut f = Fixture::new();
        assert_eq!(f.run("SET k v GET"), Reply::Null);
        assert_eq!(f.db0_effects(), vec!["SET k v"]);
        assert_eq!(f.run("SET k w get KEEPTTL GET"), Reply::bulk(b"v"));
        assert_eq!(f.db0_effects(), vec!["SET k w KEEPTTL"]);
    }

    #[test]
    fn getset_is_logged_as_set() {
        let mut f = Fixture::new();
        f.run("GETSET k v");
        assert_eq!(f.db0_effects(), vec!["SET k v"]);
    }

    #[test]
    fn getdel_is_logged_as_del() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.db0_effects();
        assert_eq!(f.run("GETDEL k"), Reply::bulk(b"v"));
        assert_eq!(f.db0_effects(), vec!["DEL k"]);
        assert_eq!(f.run("GET k"), Reply::Null);
    }

    #[test]
    fn getex_logs_pexpireat_persist_or_del() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.db0_effects();
        let before = now_ms();
        f.run("GETEX k EX 10");
        let after = now_ms();
        assert_set_pxat(
            &f.db0_effects(),
            "PEXPIREAT k ",
            before + 10_000,
            after + 10_000,
        );
        f.run("GETEX k PXAT 4000000000000");
        assert_eq!(f.db0_effects(), vec!["PEXPIREAT k 4000000000000"]);
        f.run("GETEX k PERSIST");
        assert_eq!(f.db0_effects(), vec!["PERSIST k"]);
        f.run("GETEX k PERSIST");
        assert_eq!(f.db0_effects(), Vec::<String>::new());
        // An absolute time already past deletes the key (after replying).
        assert_eq!(f.run("GETEX k EXAT 1"), Reply::bulk(b"v"));
        assert_eq!(f.db0_effects(), vec!["DEL k"]);
        assert_eq!(f.run("GET k"), Reply::Null);
    }

    #[test]
    fn incrbyfloat_is_logged_as_set_keepttl() {
        let mut f = Fixture::new();
        f.run("SET k 10.5");
        f.db0_effects();
        assert_eq!(f.run("INCRBYFLOAT k 0.1"), Reply::bulk(b"10.6"));
        assert_eq!(f.db0_effects(), vec!["SET k 10.6 KEEPTTL"]);
    }

    #[test]
    fn writing_over_an_expired_key_logs_its_deletion_first() {
        let mut f = Fixture::new();
        // SET with a past absolute time stores the key already expired,
        // as Redis 7.0 does; the next access removes it.
        assert_eq!(f.run("SET k v PXAT 1"), Reply::ok());
        assert_eq!(f.db0_effects(), vec!["SET k v PXAT 1"]);
        f.run("SET k w");
        assert_eq!(f.db0_effects(), vec!["DEL k", "SET k w"]);
        f.run("SET e v PXAT 1");
        f.db0_effects();
        assert_eq!(f.run("INCR e"), Reply::Int(1));
        assert_eq!(f.db0_effects(), vec!["DEL e", "INCR e"]);
    }

    #[test]
    fn counters_keep_the_ttl() {
        let mut f = Fixture::new();
        f.run("SET n 1 PXAT 4000000000000");
        f.run("INCR n");
        f.run("INCRBYFLOAT n 1.5");
        f.run("APPEND n 0");
        f.run("SETRANGE n 0 4");
        assert_eq!(f.run("GET n"), Reply::bulk(b"4.50"));
        assert_eq!(
            f.engine.core().keyspace.db(0).expire_at(b"n"),
            Some(4_000_000_000_000)
        );
    }
}
