//! String commands: GET/SET and their variants, counters, ranges, LCS.
//!
//! Behaviour, replies, errors and logged effects follow Redis 7.0.15's
//! `t_string.c`. Where Redis logs something other than the command as
//! received, the handler says so next to the [`Ctx::log`] call.

use super::{flags::*, is, parse_int, CmdResult, CommandSpec, Ctx, NOT_FLOAT_ERR, NOT_INT_ERR};
use crate::reply::Reply;
use crate::types::{Blob, Value, WRONGTYPE};

/// A plain (non-container) string command with one key range.
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    handler: super::Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
        group: "string",
        handler,
        subcommands: &[],
    }
}

/// Key positions of a command whose only key is the first argument.
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);

/// The string family's table (arity, flags and key positions from Redis
/// 7.0.15's `src/commands/*.json`).
pub static COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, ONE_KEY, get),
    spec("set", -3, WRITE | DENYOOM, ONE_KEY, set),
    spec("setnx", 3, WRITE | DENYOOM | FAST, ONE_KEY, setnx),
    spec("setex", 4, WRITE | DENYOOM, ONE_KEY, setex),
    spec("psetex", 4, WRITE | DENYOOM, ONE_KEY, psetex),
    spec("getset", 3, WRITE | DENYOOM | FAST, ONE_KEY, getset),
    spec("getdel", 2, WRITE | FAST, ONE_KEY, getdel),
    spec("getex", -2, WRITE | FAST, ONE_KEY, getex),
    spec("mget", -2, READONLY | FAST, (1, -1, 1), mget),
    spec("mset", -3, WRITE | DENYOOM, (1, -1, 2), mset),
    spec("msetnx", -3, WRITE | DENYOOM, (1, -1, 2), msetnx),
    spec("incr", 2, WRITE | DENYOOM | FAST, ONE_KEY, incr),
    spec("decr", 2, WRITE | DENYOOM | FAST, ONE_KEY, decr),
    spec("incrby", 3, WRITE | DENYOOM | FAST, ONE_KEY, incrby),
    spec("decrby", 3, WRITE | DENYOOM | FAST, ONE_KEY, decrby),
    spec(
        "incrbyfloat",
        3,
        WRITE | DENYOOM | FAST,
        ONE_KEY,
        incrbyfloat,
    ),
    spec("append", 3, WRITE | DENYOOM | FAST, ONE_KEY, append),
    spec("strlen", 2, READONLY | FAST, ONE_KEY, strlen),
    spec("getrange", 4, READONLY, ONE_KEY, getrange),
    spec("substr", 4, READONLY, ONE_KEY, getrange),
    spec("setrange", 4, WRITE | DENYOOM, ONE_KEY, setrange),
    spec("lcs", -3, READONLY, (1, 2, 1), lcs),
];

// ---------------------------------------------------------------------------
// Lookups.

/// The live value under `key` for reading, with one table lookup (the GET
/// hot path) and keyspace hit/miss statistics like Redis's `lookupKeyRead`.
fn lookup_value<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Option<&'c Value> {
    ctx.expire_if_needed(key);
    let db = ctx.session.db;
    let core = &mut *ctx.core;
    let found = core.keyspace.db(db).get(key);
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

/// The argument as C sees it: Redis compares option names with `strcasecmp`
/// and character tests that stop at the first NUL byte, so `GET\0x` is the
/// option GET there. Mirroring that keeps syntax errors identical.
fn c_str(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(end) => &arg[..end],
        None => arg,
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

/// A decimal integer as a blob, formatted on the stack (INCR's hot path:
/// integers fit inline, so this allocates nothing).
fn int_blob(n: i64) -> Blob {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        // 19 digits at most for |i64::MIN|, so there is room for the sign.
        pos -= 1;
        buf[pos] = b'-';
    }
    Blob::new(&buf[pos..])
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
        let found = ctx.exists(key);
        if (flags & opt::NX != 0 && found) || (flags & opt::XX != 0 && !found) {
            return Ok(get_reply.unwrap_or(aborted));
        }
    }
    // With a new expire the old TTL is replaced anyway: keeping it spares
    // removing and re-inserting the expires entry.
    let keep_ttl = flags & opt::KEEPTTL != 0 || expire_at_ms.is_some();
    ctx.set_key(key, Value::Str(Blob::new(value)), keep_ttl);
    ctx.dirty(1);
    if let Some(at_ms) = expire_at_ms {
        ctx.set_expire(key, at_ms);
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
        Some((at_ms, unit)) if unit & (opt::EXAT | opt::PXAT) != 0 && at_ms <= ctx.now_ms => {
            // An absolute time already past deletes the key at once.
            ctx.db().remove(key);
            ctx.signal_modified(key);
            ctx.dirty(1);
            ctx.log(vec![b"DEL".to_vec(), key.to_vec()]);
        }
        Some((at_ms, _)) => {
            ctx.set_expire(key, at_ms);
            ctx.dirty(1);
            ctx.log(vec![b"PEXPIREAT".to_vec(), key.to_vec(), int_arg(at_ms)]);
        }
        // PERSIST on a key without a TTL changes nothing and logs nothing.
        None if args.flags & opt::PERSIST != 0 && ctx.remove_expire(key) => {
            ctx.signal_modified(key);
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

/// MSET and MSETNX (`nx`).
fn mset_generic(ctx: &mut Ctx, argv: &[&[u8]], nx: bool) -> CmdResult {
    if argv.len().is_multiple_of(2) {
        return Err(super::arity_error(if nx { "msetnx" } else { "mset" }));
    }
    if nx && argv[1..].chunks_exact(2).any(|pair| ctx.exists(pair[0])) {
        return Ok(Reply::Int(0));
    }
    for pair in argv[1..].chunks_exact(2) {
        ctx.set_key(pair[0], Value::Str(Blob::new(pair[1])), false);
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
            *s = int_blob(new);
            new
        }
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => {
            ctx.db().insert_new(key, Value::Str(int_blob(delta)));
            delta
        }
    };
    ctx.signal_modified(key);
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
        Some(Value::Str(s)) => (long_double::parse(s).ok_or_else(not_float)?, true),
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => (long_double::Ext::Zero, false),
    };
    let delta = long_double::parse(argv[2]).ok_or_else(not_float)?;
    let sum = long_double::add(current, delta)
        .ok_or(Reply::err("ERR increment would produce NaN or Infinity"))?;
    let text = long_double::format_human(sum);
    if exists {
        // Like Redis's dbOverwrite: the TTL stays.
        ctx.set_key(key, Value::Str(Blob::new(&text)), true);
    } else {
        ctx.db().insert_new(key, Value::Str(Blob::new(&text)));
        ctx.signal_modified(key);
    }
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
            *s = Blob::from_vec(bytes);
            len
        }
        Some(_) => return Err(Reply::err(WRONGTYPE)),
        None => {
            ctx.db().insert_new(key, Value::Str(Blob::new(tail)));
            tail.len()
        }
    };
    ctx.signal_modified(key);
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
            *s = Blob::from_vec(bytes);
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
            ctx.db().insert_new(key, Value::Str(Blob::from_vec(bytes)));
            len
        }
    };
    ctx.signal_modified(key);
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

// ---------------------------------------------------------------------------
// INCRBYFLOAT arithmetic.

/// The x87 80-bit `long double` arithmetic INCRBYFLOAT uses in Redis on
/// x86-64, emulated exactly: 64-bit significands, correctly rounded
/// parsing (`strtold`), addition rounded to nearest-even, and `%.17Lf`
/// printing with trailing zeros removed. Plain `f64` would differ in
/// common cases (`0.1 + 0.2` is `0.3` in Redis), so the emulation is
/// needed for identical replies and stored values.
mod long_double {
    use std::cmp::Ordering;

    /// Lowest binary exponent of a significand's last bit (the smallest
    /// subnormal is 2^-16445).
    const MIN_LSB_EXP: i64 = -16445;
    /// Highest binary exponent of a significand's top bit.
    const MAX_TOP_EXP: i64 = 16383;
    /// Redis's `MAX_LONG_DOUBLE_CHARS`: longer inputs are not floats.
    const MAX_CHARS: usize = 5 * 1024;

    /// A `long double` value. Finite non-zero values are `mant * 2^exp`,
    /// with a full 64-bit significand unless subnormal.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum Ext {
        /// Zero (its sign never shows in INCRBYFLOAT results).
        Zero,
        /// A finite non-zero value.
        Finite { neg: bool, mant: u64, exp: i64 },
        /// An infinity.
        Inf { neg: bool },
    }

    /// An unsigned big integer, little-endian 32-bit limbs, no high zeros.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Big(Vec<u32>);

    impl Big {
        fn from_u64(v: u64) -> Big {
            let mut b = Big(vec![v as u32, (v >> 32) as u32]);
            b.trim();
            b
        }

        fn trim(&mut self) {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
        }

        fn is_zero(&self) -> bool {
            self.0.is_empty()
        }

        fn bit_len(&self) -> u64 {
            match self.0.last() {
                None => 0,
                Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
            }
        }

        fn bit(&self, i: u64) -> bool {
            let limb = (i / 32) as usize;
            limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
        }

        /// True when any bit below position `i` is set.
        fn any_below(&self, i: u64) -> bool {
            let full = ((i / 32) as usize).min(self.0.len());
            if self.0[..full].iter().any(|&l| l != 0) {
                return true;
            }
            let rest = i % 32;
            full < self.0.len() && rest > 0 && self.0[full] & ((1u32 << rest) - 1) != 0
        }

        fn mul_add_small(&mut self, m: u32, add: u32) {
            let mut carry = u64::from(add);
            for limb in &mut self.0 {
                let v = u64::from(*limb) * u64::from(m) + carry;
                *limb = v as u32;
                carry = v >> 32;
            }
            if carry > 0 {
                self.0.push(carry as u32);
            }
            self.trim();
        }

        fn pow10(n: u64) -> Big {
            let mut b = Big(vec![1]);
            let mut left = n;
            while left >= 9 {
                b.mul_add_small(1_000_000_000, 0);
                left -= 9;
            }
            b.mul_add_small(10u32.pow(left as u32), 0);
            b
        }

        fn mul(&self, other: &Big) -> Big {
            let mut out = vec![0u32; self.0.len() + other.0.len()];
            for (i, &x) in self.0.iter().enumerate() {
                let mut carry = 0u64;
                for (j, &y) in other.0.iter().enumerate() {
                    let v = u64::from(x) * u64::from(y) + u64::from(out[i + j]) + carry;
                    out[i + j] = v as u32;
                    carry = v >> 32;
                }
                out[i + other.0.len()] = carry as u32;
            }
            let mut b = Big(out);
            b.trim();
            b
        }

        fn shl(&self, bits: u64) -> Big {
            if self.is_zero() {
                return self.clone();
            }
            let limbs = (bits / 32) as usize;
            let rest = bits % 32;
            let mut out = vec![0u32; limbs];
            if rest == 0 {
                out.extend_from_slice(&self.0);
            } else {
                let mut carry = 0u32;
                for &l in &self.0 {
                    out.push((l << rest) | carry);
                    carry = l >> (32 - rest);
                }
                out.push(carry);
            }
            let mut b = Big(out);
            b.trim();
            b
        }

        fn shr(&self, bits: u64) -> Big {
            let limbs = (bits / 32) as usize;
            if limbs >= self.0.len() {
                return Big(Vec::new());
            }
            let rest = bits % 32;
            let src = &self.0[limbs..];
            let mut out = Vec::with_capacity(src.len());
            for (k, &l) in src.iter().enumerate() {
                let high = if rest == 0 {
                    0
                } else {
                    src.get(k + 1).map_or(0, |&h| h << (32 - rest))
                };
                out.push((l >> rest) | high);
            }
            let mut b = Big(out);
            b.trim();
            b
        }

        fn add(&self, other: &Big) -> Big {
            let (long, short) = if self.0.len() >= other.0.len() {
                (self, other)
            } else {
                (other, self)
            };
            let mut out = Vec::with_capacity(long.0.len() + 1);
            let mut carry = 0u64;
            for (k, &l) in long.0.iter().enumerate() {
                let v = u64::from(l) + u64::from(short.0.get(k).copied().unwrap_or(0)) + carry;
                out.push(v as u32);
                carry = v >> 32;
            }
            out.push(carry as u32);
            let mut b = Big(out);
            b.trim();
            b
        }

        /// `self - other`, requiring `self >= other`.
        fn sub(&self, other: &Big) -> Big {
            debug_assert!(
                self.cmp_big(other) != Ordering::Less,
                "sub needs a larger minuend"
            );
            let mut out = Vec::with_capacity(self.0.len());
            let mut borrow = 0i64;
            for (k, &l) in self.0.iter().enumerate() {
                let mut v = i64::from(l) - i64::from(other.0.get(k).copied().unwrap_or(0)) - borrow;
                borrow = 0;
                if v < 0 {
                    v += 1 << 32;
                    borrow = 1;
                }
                out.push(v as u32);
            }
            let mut b = Big(out);
            b.trim();
            b
        }

        fn cmp_big(&self, other: &Big) -> Ordering {
            self.0
                .len()
                .cmp(&other.0.len())
                .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
        }

        /// The low 64 bits.
        fn low_u64(&self) -> u64 {
            u64::from(self.0.first().copied().unwrap_or(0))
                | (u64::from(self.0.get(1).copied().unwrap_or(0)) << 32)
        }

        /// Decimal digits (at least one).
        fn to_decimal(&self) -> Vec<u8> {
            let mut n = self.clone();
            let mut chunks = Vec::new();
            while !n.is_zero() {
                let mut rem = 0u64;
                for limb in n.0.iter_mut().rev() {
                    let cur = (rem << 32) | u64::from(*limb);
                    *limb = (cur / 1_000_000_000) as u32;
                    rem = cur % 1_000_000_000;
                }
                n.trim();
                chunks.push(rem as u32);
            }
            let mut out = Vec::new();
            match chunks.pop() {
                None => out.push(b'0'),
                Some(top) => out.extend_from_slice(top.to_string().as_bytes()),
            }
            for chunk in chunks.iter().rev() {
                out.extend_from_slice(format!("{chunk:09}").as_bytes());
            }
            out
        }
    }

    /// Rounds `n * 2^exp` (plus a positive amount below the last bit of `n`
    /// when `sticky`) to a `long double`, to nearest-even. `None` when it
    /// overflows (strtold: ERANGE, HUGE_VALL) or underflows to zero.
    fn round(neg: bool, n: &Big, exp: i64, sticky: bool) -> Option<Ext> {
        let bits = n.bit_len() as i64;
        debug_assert!(bits > 0, "round is only called with a non-zero value");
        let lsb = (exp + bits - 64).max(MIN_LSB_EXP);
        let shift = lsb - exp;
        let (mant, lsb) = if shift <= 0 {
            // Exact: the value fits the significand as it is.
            debug_assert!(
                !sticky,
                "a sticky remainder needs bits below the significand"
            );
            (n.shl((-shift) as u64).low_u64(), lsb)
        } else {
            let shift = shift as u64;
            let kept = n.shr(shift).low_u64();
            let half = n.bit(shift - 1);
            let below = sticky || n.any_below(shift - 1);
            if half && (below || kept & 1 == 1) {
                match kept.checked_add(1) {
                    Some(m) => (m, lsb),
                    // Carried out to 2^64: the same value is 2^63 * 2^(lsb+1).
                    None => (1 << 63, lsb + 1),
                }
            } else {
                (kept, lsb)
            }
        };
        if mant == 0 {
            return None;
        }
        let top = lsb + 63 - i64::from(mant.leading_zeros());
        if top > MAX_TOP_EXP {
            return None;
        }
        Some(Ext::Finite {
            neg,
            mant,
            exp: lsb,
        })
    }

    /// Parses `s` as Redis's `string2ld` does (`strtold` over the whole
    /// input, no leading space, no NaN, no overflow, no underflow to zero).
    pub fn parse(s: &[u8]) -> Option<Ext> {
        if s.is_empty()
            || s.len() >= MAX_CHARS
            || matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
        {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Ext::Inf { neg });
        }
        if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
            return parse_hex(neg, &body[2..]);
        }
        parse_decimal(neg, body)
    }

    /// Reads an optionally signed decimal exponent, saturating far beyond
    /// any exponent that matters.
    fn parse_exponent(s: &[u8]) -> Option<i64> {
        let (neg, digits) = match s.first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut v: i64 = 0;
        for &d in digits {
            v = (v * 10 + i64::from(d - b'0')).min(1_000_000_000);
        }
        Some(if neg { -v } else { v })
    }

    fn parse_decimal(neg: bool, s: &[u8]) -> Option<Ext> {
        let mantissa_end = s
            .iter()
            .position(|&c| c == b'e' || c == b'E')
            .unwrap_or(s.len());
        let (mantissa, exponent) = s.split_at(mantissa_end);
        let exp10 = if exponent.is_empty() {
            0
        } else {
            parse_exponent(&exponent[1..])?
        };
        let (int_part, frac_part) = match mantissa.iter().position(|&c| c == b'.') {
            Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
            None => (mantissa, &mantissa[..0]),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        if !int_part.iter().chain(frac_part).all(u8::is_ascii_digit) {
            return None;
        }
        let mut digits = Big(Vec::new());
        let mut significant = 0i64;
        for &d in int_part.iter().chain(frac_part) {
            if significant > 0 || d != b'0' {
                significant += 1;
            }
            digits.mul_add_small(10, u32::from(d - b'0'));
        }
        if digits.is_zero() {
            return Some(Ext::Zero);
        }
        let exp10 = exp10 - frac_part.len() as i64;
        // Decimal exponent of the leading digit: far outside the range of
        // long double (about 3.6e-4951 to 1.2e4932) means overflow or
        // underflow without computing anything.
        let leading = significant - 1 + exp10;
        if leading > 4933 {
            return None;
        }
        if leading < -4952 {
            return None;
        }
        if exp10 >= 0 {
            let n = digits.mul(&Big::pow10(exp10 as u64));
            return round(neg, &n, 0, false);
        }
        // value = digits / 10^-exp10: divide with enough quotient bits
        // (67 or more) that the remainder only matters as a sticky bit.
        let divisor = Big::pow10((-exp10) as u64);
        let scale = (68 + divisor.bit_len() as i64 - digits.bit_len() as i64).max(0) as u64;
        let mut rem = digits.shl(scale);
        let mut quotient = Big(Vec::new());
        let top = rem.bit_len() as i64 - divisor.bit_len() as i64;
        if top >= 0 {
            let mut step = divisor.shl(top as u64);
            let mut q_bits = vec![false; top as usize + 1];
            for k in (0..=top as usize).rev() {
                if rem.cmp_big(&step) != Ordering::Less {
                    rem = rem.sub(&step);
                    q_bits[k] = true;
                }
                step = step.shr(1);
            }
            for &bit in q_bits.iter().rev() {
                quotient.mul_add_small(2, u32::from(bit));
            }
        }
        round(neg, &quotient, -(scale as i64), !rem.is_zero())
    }

    fn parse_hex(neg: bool, s: &[u8]) -> Option<Ext> {
        let mantissa_end = s
            .iter()
            .position(|&c| c == b'p' || c == b'P')
            .unwrap_or(s.len());
        let (mantissa, exponent) = s.split_at(mantissa_end);
        let exp2 = if exponent.is_empty() {
            0
        } else {
            parse_exponent(&exponent[1..])?
        };
        let (int_part, frac_part) = match mantissa.iter().position(|&c| c == b'.') {
            Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
            None => (mantissa, &mantissa[..0]),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let mut n = Big(Vec::new());
        for &c in int_part.iter().chain(frac_part) {
            let digit = (c as char).to_digit(16)?;
            n.mul_add_small(16, digit);
        }
        if n.is_zero() {
            return Some(Ext::Zero);
        }
        let exp = exp2 - 4 * frac_part.len() as i64;
        if exp + n.bit_len() as i64 > MAX_TOP_EXP + 2
            || exp + (n.bit_len() as i64) < MIN_LSB_EXP - 2
        {
            return None;
        }
        round(neg, &n, exp, false)
    }

    /// `a + b` rounded to nearest-even; `None` for an infinite or NaN
    /// result (any infinite operand gives one of those).
    pub fn add(a: Ext, b: Ext) -> Option<Ext> {
        match (a, b) {
            (Ext::Inf { .. }, _) | (_, Ext::Inf { .. }) => None,
            (Ext::Zero, x) | (x, Ext::Zero) => Some(x),
            (
                Ext::Finite {
                    neg: na,
                    mant: ma,
                    exp: ea,
                },
                Ext::Finite {
                    neg: nb,
                    mant: mb,
                    exp: eb,
                },
            ) => {
                // Far apart, the smaller is below a quarter unit of the
                // larger's last place (whose significand is full when it is
                // that much larger), so the sum rounds back to the larger.
                if ea - eb > 130 {
                    return Some(a);
                }
                if eb - ea > 130 {
                    return Some(b);
                }
                let low = ea.min(eb);
                let x = Big::from_u64(ma).shl((ea - low) as u64);
                let y = Big::from_u64(mb).shl((eb - low) as u64);
                let (neg, n) = if na == nb {
                    (na, x.add(&y))
                } else {
                    match x.cmp_big(&y) {
                        Ordering::Equal => return Some(Ext::Zero),
                        Ordering::Greater => (na, x.sub(&y)),
                        Ordering::Less => (nb, y.sub(&x)),
                    }
                };
                round(neg, &n, low, false)
            }
        }
    }

    /// `printf("%.17Lf")` with trailing zeros (and a bare point) removed,
    /// and `-0` printed as `0` — Redis's `LD_STR_HUMAN`. `value` is finite.
    pub fn format_human(value: Ext) -> Vec<u8> {
        let (neg, mant, exp) = match value {
            Ext::Finite { neg, mant, exp } => (neg, mant, exp),
            Ext::Zero | Ext::Inf { .. } => return b"0".to_vec(),
        };
        // The value times 10^17, rounded to an integer (nearest-even, as
        // glibc rounds printf output), gives all the printed digits.
        let scaled = Big::from_u64(mant).mul(&Big::pow10(17));
        let units = if exp >= 0 {
            scaled.shl(exp as u64)
        } else {
            let shift = (-exp) as u64;
            let kept = scaled.shr(shift);
            let half = scaled.bit(shift - 1);
            let up = half && (scaled.any_below(shift - 1) || kept.bit(0));
            if up {
                kept.add(&Big(vec![1]))
            } else {
                kept
            }
        };
        let mut digits = units.to_decimal();
        if digits.len() < 18 {
            let mut padded = vec![b'0'; 18 - digits.len()];
            padded.extend_from_slice(&digits);
            digits = padded;
        }
        let point = digits.len() - 17;
        let mut frac_end = digits.len();
        while frac_end > point && digits[frac_end - 1] == b'0' {
            frac_end -= 1;
        }
        let mut out = Vec::with_capacity(frac_end + 2);
        let is_zero = digits[..frac_end].iter().all(|&d| d == b'0');
        if neg && !is_zero {
            out.push(b'-');
        }
        out.extend_from_slice(&digits[..point]);
        if frac_end > point {
            out.push(b'.');
            out.extend_from_slice(&digits[point..frac_end]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::long_double;
    use crate::command::{Effect, Session};
    use crate::config::Config;
    use crate::engine::{now_ms, Engine};
    use crate::reply::Reply;

    struct Fixture {
        engine: Engine,
        session: Session,
    }

    impl Fixture {
        fn new() -> Fixture {
            let mut engine =
                Engine::open(Config::in_memory()).expect("an in-memory config is valid");
            let session = engine.new_session();
            Fixture { engine, session }
        }

        fn run(&mut self, line: &str) -> Reply {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            self.engine.execute(&mut self.session, &args)
        }

        /// The effects logged since the last call, as space-joined text.
        fn effects(&mut self) -> Vec<String> {
            self.engine
                .take_effects()
                .into_iter()
                .map(|Effect { db, argv }| {
                    assert_eq!(db, 0, "every test runs in database 0");
                    argv.iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        }
    }

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
            assert_eq!(f.effects(), vec![line.to_string()], "{line}");
        }
    }

    #[test]
    fn commands_that_change_nothing_log_nothing() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.run("SET l 1");
        f.effects();
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
            assert_eq!(f.effects(), Vec::<String>::new(), "{line}");
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
            f.effects();
            let before = now_ms();
            let reply = f.run(line);
            let after = now_ms();
            assert!(!reply.is_error(), "{line}: {reply:?}");
            assert_set_pxat(&f.effects(), prefix, before + ttl_ms, after + ttl_ms);
        }
        f.run("SET k v EXAT 4000000000");
        assert_eq!(f.effects(), vec!["SET k v PXAT 4000000000000"]);
        f.run("SET k v PXAT 4000000000123");
        assert_eq!(f.effects(), vec!["SET k v PXAT 4000000000123"]);
    }

    #[test]
    fn set_get_is_logged_without_get() {
        let mut f = Fixture::new();
        assert_eq!(f.run("SET k v GET"), Reply::Null);
        assert_eq!(f.effects(), vec!["SET k v"]);
        assert_eq!(f.run("SET k w get KEEPTTL GET"), Reply::bulk(b"v"));
        assert_eq!(f.effects(), vec!["SET k w KEEPTTL"]);
    }

    #[test]
    fn getset_is_logged_as_set() {
        let mut f = Fixture::new();
        f.run("GETSET k v");
        assert_eq!(f.effects(), vec!["SET k v"]);
    }

    #[test]
    fn getdel_is_logged_as_del() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.effects();
        assert_eq!(f.run("GETDEL k"), Reply::bulk(b"v"));
        assert_eq!(f.effects(), vec!["DEL k"]);
        assert_eq!(f.run("GET k"), Reply::Null);
    }

    #[test]
    fn getex_logs_pexpireat_persist_or_del() {
        let mut f = Fixture::new();
        f.run("SET k v");
        f.effects();
        let before = now_ms();
        f.run("GETEX k EX 10");
        let after = now_ms();
        assert_set_pxat(
            &f.effects(),
            "PEXPIREAT k ",
            before + 10_000,
            after + 10_000,
        );
        f.run("GETEX k PXAT 4000000000000");
        assert_eq!(f.effects(), vec!["PEXPIREAT k 4000000000000"]);
        f.run("GETEX k PERSIST");
        assert_eq!(f.effects(), vec!["PERSIST k"]);
        f.run("GETEX k PERSIST");
        assert_eq!(f.effects(), Vec::<String>::new());
        // An absolute time already past deletes the key (after replying).
        assert_eq!(f.run("GETEX k EXAT 1"), Reply::bulk(b"v"));
        assert_eq!(f.effects(), vec!["DEL k"]);
        assert_eq!(f.run("GET k"), Reply::Null);
    }

    #[test]
    fn incrbyfloat_is_logged_as_set_keepttl() {
        let mut f = Fixture::new();
        f.run("SET k 10.5");
        f.effects();
        assert_eq!(f.run("INCRBYFLOAT k 0.1"), Reply::bulk(b"10.6"));
        assert_eq!(f.effects(), vec!["SET k 10.6 KEEPTTL"]);
    }

    #[test]
    fn writing_over_an_expired_key_logs_its_deletion_first() {
        let mut f = Fixture::new();
        // SET with a past absolute time stores the key already expired,
        // as Redis 7.0 does; the next access removes it.
        assert_eq!(f.run("SET k v PXAT 1"), Reply::ok());
        assert_eq!(f.effects(), vec!["SET k v PXAT 1"]);
        f.run("SET k w");
        assert_eq!(f.effects(), vec!["DEL k", "SET k w"]);
        f.run("SET e v PXAT 1");
        f.effects();
        assert_eq!(f.run("INCR e"), Reply::Int(1));
        assert_eq!(f.effects(), vec!["DEL e", "INCR e"]);
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

    fn incr_float(a: &str, b: &str) -> Option<String> {
        let a = long_double::parse(a.as_bytes())?;
        let b = long_double::parse(b.as_bytes())?;
        let sum = long_double::add(a, b)?;
        Some(String::from_utf8(long_double::format_human(sum)).expect("digits are ASCII"))
    }

    #[test]
    fn long_double_sums_print_like_redis() {
        // Expected values from Redis 7.0.15 on x86-64.
        for (a, b, expected) in [
            ("0.1", "0.2", "0.3"),
            ("10.5", "0.1", "10.6"),
            ("0", "1e30", "1000000000000000000024696061952"),
            ("1", "0.000003814697265625", "1.00000381469726562"),
            ("3", "0", "3"),
            ("-1e-20", "0", "0"),
            ("5.0e3", "2.0e2", "5200"),
            ("0", "0x1p-16445", "0"),
            ("0", "-.5e1", "-5"),
            ("0", "0x1.8p1", "3"),
        ] {
            assert_eq!(incr_float(a, b).as_deref(), Some(expected), "{a} + {b}");
        }
    }

    #[test]
    fn long_double_rejects_what_strtold_rejects() {
        for bad in [
            "", " 1", "1 ", "nan", "1e", "1e+", ".", "-", "1e-5000", "1e5000", "0x", "1.2.3",
            "++1", "1x",
        ] {
            assert!(long_double::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        let too_long = "1".repeat(5120);
        assert!(long_double::parse(too_long.as_bytes()).is_none());
        for good in ["inf", "-Infinity", "1e4932", "0e999999", "1.", ".5", "+3"] {
            assert!(long_double::parse(good.as_bytes()).is_some(), "{good:?}");
        }
        assert_eq!(incr_float("inf", "1"), None);
        assert_eq!(incr_float("1.1e4932", "1.1e4932"), None);
    }
}
