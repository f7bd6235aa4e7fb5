//! Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO.
//!
//! Behaviour, replies, errors and logged effects follow Redis 7.0.15's
//! `bitops.c`; every write is logged as received. The bit arithmetic is in
//! [`crate::types::bits`].

use super::c_str;
use super::{is, parse_int, syntax_error, CmdResult, CommandSpec, Ctx};
use crate::core::notify;
use crate::reply::Reply;
use crate::types::bits::{self, Overflow};
use crate::types::num::parse_i64;
use crate::types::{Blob, Value, WRONGTYPE};

/// A bitmap command: arity, flags and key positions from the generated
/// metadata ([`super::docs`]).
const fn spec(name: &'static str, handler: super::Handler) -> CommandSpec {
    CommandSpec::from_docs(name, name, "bitmap", handler)
}

/// The bitmap family's table.
pub static COMMANDS: &[CommandSpec] = &[
    spec("setbit", setbit),
    spec("getbit", getbit),
    spec("bitcount", bitcount),
    spec("bitpos", bitpos),
    spec("bitop", bitop),
    spec("bitfield", bitfield),
    spec("bitfield_ro", bitfield_ro),
];

const OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";
const TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Parses a bit offset (Redis's `getBitOffsetFromArgument`): a
/// non-negative integer whose byte is below `proto-max-bulk-len` (not
/// checked while replaying the log or for the master's stream). With
/// `field_bits` > 0 (BITFIELD), `#N` means `N * field_bits`.
fn bit_offset(ctx: &Ctx, arg: &[u8], field_bits: u32) -> Result<u64, Reply> {
    let by_index = field_bits > 0 && arg.first() == Some(&b'#');
    let digits = if by_index { &arg[1..] } else { arg };
    let mut offset = parse_i64(digits).ok_or(Reply::err(OFFSET_ERR))?;
    if by_index {
        // C's multiplication wraps (and a wrapped negative is refused).
        offset = offset.wrapping_mul(i64::from(field_bits));
    }
    let obey = ctx.core.loading || ctx.session.is_master;
    if offset < 0 || (!obey && (offset >> 3) as u64 >= ctx.core.config.proto_max_bulk_len) {
        return Err(Reply::err(OFFSET_ERR));
    }
    Ok(offset as u64)
}

/// The string at `key` for reading: `None` when missing, WRONGTYPE for
/// other types.
fn read_str<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c [u8]>, Reply> {
    match ctx.lookup_read(key) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.as_bytes())),
        Some(_) => Err(Reply::err(WRONGTYPE)),
    }
}

/// Runs `f` on the string at `key`, first created or zero-padded to at
/// least `len` bytes (Redis's `lookupStringForBitCommand`); `f` is told
/// whether the string was created or grew. WRONGTYPE for other types.
fn with_bits<R>(
    ctx: &mut Ctx,
    key: &[u8],
    len: usize,
    f: impl FnOnce(&mut [u8], bool) -> R,
) -> Result<R, Reply> {
    match ctx.lookup_write(key) {
        Some(Value::Str(s)) => {
            let mut bytes = std::mem::take(s).into_vec();
            let grown = bytes.len() < len;
            if grown {
                bytes.resize(len, 0);
            }
            let out = f(&mut bytes, grown);
            *s = Blob::raw_from_vec(bytes);
            Ok(out)
        }
        Some(_) => Err(Reply::err(WRONGTYPE)),
        None => {
            let mut bytes = vec![0u8; len];
            let out = f(&mut bytes, true);
            ctx.db()
                .insert_new(key, Value::Str(Blob::raw_from_vec(bytes)));
            ctx.notify_new(key);
            Ok(out)
        }
    }
}

// ---------------------------------------------------------------------------
// SETBIT, GETBIT.

fn setbit(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let key = argv[1];
    let offset = bit_offset(ctx, argv[2], 0)?;
    let bit_err = || Reply::err("ERR bit is not an integer or out of range");
    let on = parse_i64(argv[3]).ok_or_else(bit_err)?;
    if on & !1 != 0 {
        return Err(bit_err());
    }
    let on = on == 1;
    let len = (offset >> 3) as usize + 1;
    let (old, changed) = with_bits(ctx, key, len, |bytes, grown| {
        let old = bits::get_bit(bytes, offset);
        bits::set_bit(bytes, offset, on);
        (old, grown || old != on)
    })?;
    if changed {
        ctx.signal_modified(key);
        ctx.notify(notify::STRING, "setbit", key);
        ctx.dirty(1);
    }
    Ok(Reply::Int(i64::from(old)))
}

fn getbit(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let offset = bit_offset(ctx, argv[2], 0)?;
    let bytes = read_str(ctx, argv[1])?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bits::get_bit(bytes, offset))))
}

// ---------------------------------------------------------------------------
// BITCOUNT, BITPOS.

/// True for the BIT unit, false for BYTE; a syntax error otherwise.
fn parse_unit(arg: &[u8]) -> Result<bool, Reply> {
    let unit = c_str(arg);
    if is(unit, "bit") {
        Ok(true)
    } else if is(unit, "byte") {
        Ok(false)
    } else {
        syntax_error()
    }
}

/// The inclusive bit range `start..=end` (in `unit_bits` units: 1 or 8)
/// of a string of `len` bytes, negative indexes counting from the end,
/// clamped to the string as Redis does; `None` when it is empty.
fn bit_range(len: usize, start: i64, end: i64, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let resolve = |i: i64| if i < 0 { (i + total).max(0) } else { i };
    let start = resolve(start);
    let end = resolve(end).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The number of set bits among bits `from..=to` of `bytes`.
fn count_range(bytes: &[u8], from: u64, to: u64) -> u64 {
    let (first, last) = ((from >> 3) as usize, (to >> 3) as usize);
    let head = bytes[first] & !(0xffu8 >> (from & 7));
    let tail = bytes[last] & !(0xffu8 << (7 - (to & 7)));
    bits::popcount(&bytes[first..=last]) - u64::from(head.count_ones() + tail.count_ones())
}

fn bitcount(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    // Redis looks the key up before it reads the other arguments.
    let Some(bytes) = read_str(ctx, argv[1])? else {
        return Ok(Reply::Int(0));
    };
    let (start, end, in_bits) = match argv.len() {
        2 => (0, -1, false),
        4 | 5 => {
            let start = parse_int(argv[2])?;
            let end = parse_int(argv[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = match argv.get(4) {
                Some(unit) => parse_unit(unit)?,
                None => false,
            };
            (start, end, in_bits)
        }
        _ => return syntax_error(),
    };
    Ok(Reply::Int(
        bit_range(bytes.len(), start, end, in_bits)
            .map_or(0, |(from, to)| count_range(bytes, from, to)) as i64,
    ))
}

fn bitpos(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let bit = parse_int(argv[2])?;
    if bit != 0 && bit != 1 {
        return Err(Reply::err("ERR The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let Some(bytes) = read_str(ctx, argv[1])? else {
        return Ok(Reply::Int(if bit { -1 } else { 0 }));
    };
    let (start, end, in_bits, end_given) = match argv.len() {
        3 => (0, -1, false, false),
        4..=6 => {
            let start = parse_int(argv[3])?;
            let in_bits = match argv.get(5) {
                Some(unit) => parse_unit(unit)?,
                None => false,
            };
            match argv.get(4) {
                Some(end) => (start, parse_int(end)?, in_bits, true),
                None => (start, -1, in_bits, false),
            }
        }
        _ => return syntax_error(),
    };
    let Some((from, to)) = bit_range(bytes.len(), start, end, in_bits) else {
        return Ok(Reply::Int(-1));
    };
    Ok(Reply::Int(match bits::first_bit_in(bytes, from, to, bit) {
        Some(pos) => pos as i64,
        // Without an explicit end the string counts as padded with zeros.
        None if !bit && !end_given => to as i64 + 1,
        None => -1,
    }))
}

// ---------------------------------------------------------------------------
// BITOP.

/// The bitwise operations of BITOP.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let name = c_str(argv[1]);
    let op = if is(name, "and") {
        BitOp::And
    } else if is(name, "or") {
        BitOp::Or
    } else if is(name, "xor") {
        BitOp::Xor
    } else if is(name, "not") {
        BitOp::Not
    } else {
        return syntax_error();
    };
    if op == BitOp::Not && argv.len() != 4 {
        return Err(Reply::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let dest = argv[2];
    let mut sources: Vec<Vec<u8>> = Vec::with_capacity(argv.len() - 3);
    for key in &argv[3..] {
        sources.push(read_str(ctx, key)?.map(<[u8]>::to_vec).unwrap_or_default());
    }
    let max_len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |src: &Vec<u8>, j: usize| src.get(j).copied().unwrap_or(0);
    let result: Vec<u8> = (0..max_len)
        .map(|j| {
            let first = byte(&sources[0], j);
            sources[1..].iter().fold(first, |acc, src| match op {
                BitOp::And => acc & byte(src, j),
                BitOp::Or => acc | byte(src, j),
                BitOp::Xor => acc ^ byte(src, j),
                BitOp::Not => !acc,
            })
        })
        .map(|b| if op == BitOp::Not { !b } else { b })
        .collect();
    if max_len > 0 {
        ctx.set_key(dest, Value::Str(Blob::raw_from_vec(result)), false);
        ctx.notify(notify::STRING, "set", dest);
        ctx.dirty(1);
    } else if ctx.delete_key(dest) {
        ctx.dirty(1);
    }
    Ok(Reply::Int(max_len as i64))
}

// ---------------------------------------------------------------------------
// BITFIELD, BITFIELD_RO.

/// What one BITFIELD operation does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

/// One parsed BITFIELD operation.
struct Field {
    op: FieldOp,
    /// SET's value or INCRBY's increment (0 for GET).
    value: i64,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// Parses a field type (`i1`…`i64`, `u1`…`u63`).
fn field_type(arg: &[u8]) -> Result<(bool, u32), Reply> {
    let arg = c_str(arg);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Reply::err(TYPE_ERR)),
    };
    let max = if signed { 64 } else { 63 };
    match parse_i64(&arg[1..]) {
        Some(bits) if (1..=max).contains(&bits) => Ok((signed, bits as u32)),
        _ => Err(Reply::err(TYPE_ERR)),
    }
}

/// Parses BITFIELD's operations (all of them before anything runs, as
/// Redis does). Returns them and the highest bit a SET or INCRBY writes
/// (`None` when there is none: the command only reads).
fn parse_fields(ctx: &Ctx, argv: &[&[u8]]) -> Result<(Vec<Field>, Option<u64>), Reply> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < argv.len() {
        let remaining = argv.len() - j - 1;
        let sub = c_str(argv[j]);
        let needs_value = if is(sub, "get") && remaining >= 2 {
            false
        } else if (is(sub, "set") || is(sub, "incrby")) && remaining >= 3 {
            true
        } else if is(sub, "overflow") && remaining >= 1 {
            let mode = c_str(argv[j + 1]);
            overflow = if is(mode, "wrap") {
                Overflow::Wrap
            } else if is(mode, "sat") {
                Overflow::Sat
            } else if is(mode, "fail") {
                Overflow::Fail
            } else {
                return Err(Reply::err("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return syntax_error();
        };
        let (signed, bits) = field_type(argv[j + 1])?;
        let offset = bit_offset(ctx, argv[j + 2], bits)?;
        let (op, value) = if needs_value {
            let last = offset + u64::from(bits) - 1;
            highest = Some(highest.map_or(last, |h| h.max(last)));
            let value = parse_int(argv[j + 3])?;
            let op = if is(sub, "set") {
                FieldOp::Set
            } else {
                FieldOp::IncrBy
            };
            (op, value)
        } else {
            (FieldOp::Get, 0)
        };
        fields.push(Field {
            op,
            value,
            signed,
            bits,
            offset,
            overflow,
        });
        j += if needs_value { 4 } else { 3 };
    }
    Ok((fields, highest))
}

/// Reads one field (bits past the end of `bytes` read as 0).
fn get_field(bytes: &[u8], f: &Field) -> Reply {
    if f.signed {
        Reply::Int(bits::get_signed(bytes, f.offset, f.bits))
    } else {
        Reply::Int(bits::get_unsigned(bytes, f.offset, f.bits) as i64)
    }
}

/// Runs a SET or INCRBY on `bytes` (long enough for the field): returns
/// the reply (null when OVERFLOW FAIL refused it) and whether the field
/// counts as a change (`grown`: the string was created or padded).
fn write_field(bytes: &mut [u8], f: &Field, grown: bool) -> (Reply, bool) {
    let (old, new, reply, overflowed) = if f.signed {
        let old = bits::get_signed(bytes, f.offset, f.bits);
        let (new, over, ret) = if f.op == FieldOp::IncrBy {
            let over = bits::signed_overflow(old, f.value, f.bits, f.overflow);
            let new = over.unwrap_or(old.wrapping_add(f.value));
            (new, over, new)
        } else {
            let over = bits::signed_overflow(f.value, 0, f.bits, f.overflow);
            (over.unwrap_or(f.value), over, old)
        };
        (old as u64, new as u64, ret, over.is_some())
    } else {
        let old = bits::get_unsigned(bytes, f.offset, f.bits);
        let (new, over, ret) = if f.op == FieldOp::IncrBy {
            let over = bits::unsigned_overflow(old, f.value, f.bits, f.overflow);
            let new = over.unwrap_or(old.wrapping_add(f.value as u64));
            (new, over, new)
        } else {
            let value = f.value as u64;
            let over = bits::unsigned_overflow(value, 0, f.bits, f.overflow);
            (over.unwrap_or(value), over, old)
        };
        (old, new, ret as i64, over.is_some())
    };
    if overflowed && f.overflow == Overflow::Fail {
        return (Reply::Null, false);
    }
    bits::set_unsigned(bytes, f.offset, f.bits, new);
    (Reply::Int(reply), grown || old != new)
}

/// BITFIELD and BITFIELD_RO (`read_only`: only GET is accepted).
fn bitfield_generic(ctx: &mut Ctx, argv: &[&[u8]], read_only: bool) -> CmdResult {
    let key = argv[1];
    let (fields, highest) = parse_fields(ctx, argv)?;
    let Some(highest) = highest else {
        let bytes = read_str(ctx, key)?.unwrap_or_default();
        return Ok(Reply::Array(
            fields.iter().map(|f| get_field(bytes, f)).collect(),
        ));
    };
    if read_only {
        return Err(Reply::err(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let len = (highest >> 3) as usize + 1;
    // A field refused by OVERFLOW FAIL changes nothing, though the string
    // was created or padded already (as in Redis, unlogged then).
    let (replies, changes) = with_bits(ctx, key, len, |bytes, grown| {
        let mut changes = 0u64;
        let replies: Vec<Reply> = fields
            .iter()
            .map(|f| {
                if f.op == FieldOp::Get {
                    return get_field(bytes, f);
                }
                let (reply, changed) = write_field(bytes, f, grown);
                changes += u64::from(changed);
                reply
            })
            .collect();
        (replies, changes)
    })?;
    if changes > 0 {
        ctx.signal_modified(key);
        ctx.notify(notify::STRING, "setbit", key);
        ctx.dirty(changes);
    }
    Ok(Reply::Array(replies))
}

fn bitfield(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, argv, false)
}

fn bitfield_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    bitfield_generic(ctx, argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::test_support::Fixture;

    #[test]
    fn writes_are_logged_as_received_and_no_ops_are_not() {
        let mut f = Fixture::new();
        for (line, logged) in [
            ("SETBIT k 7 1", true),
            ("SETBIT k 7 1", false),
            ("SETBIT k 7 0", true),
            ("SETBIT k 7 0", false),
            ("SETBIT k 20 0", true),
            ("GETBIT k 7", false),
            ("BITCOUNT k", false),
            ("BITPOS k 1", false),
            ("BITFIELD k GET u8 0", false),
            ("BITFIELD k SET u8 0 0", false),
            ("BITFIELD k SET u8 0 5 GET u8 0", true),
            ("BITFIELD k SET u8 40 0", true),
            ("BITFIELD k OVERFLOW FAIL INCRBY u8 0 255", false),
            ("BITFIELD k OVERFLOW FAIL SET u8 80 256", false),
            ("BITFIELD_RO k GET u8 0", false),
            ("BITFIELD k SET u8 0 x", false),
            ("BITOP AND d missing", false),
            ("BITOP NOT d k", true),
            ("BITOP AND d missing", true),
            ("BITOP AND d missing", false),
        ] {
            f.run(line);
            let want = if logged {
                vec![line.to_string()]
            } else {
                vec![]
            };
            assert_eq!(f.db0_effects(), want, "{line}");
        }
        // The refused OVERFLOW FAIL still padded the string, as in Redis.
        assert_eq!(f.run("STRLEN k"), Reply::Int(11));
    }

    #[test]
    fn ranges_follow_redis() {
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, 1, 1, false), Some((8, 15)));
        assert_eq!(bit_range(3, -100, 100, true), Some((0, 23)));
        assert_eq!(bit_range(3, 5, 2, true), None);
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(3, 3, 10, false), None);
    }

    #[test]
    fn count_range_trims_edges() {
        let b = [0xff, 0xff, 0xff];
        assert_eq!(count_range(&b, 0, 23), 24);
        assert_eq!(count_range(&b, 3, 3), 1);
        assert_eq!(count_range(&b, 5, 17), 13);
    }

    #[test]
    fn field_types() {
        assert!(field_type(b"i64").is_ok());
        assert!(field_type(b"u64").is_err());
        assert_eq!(field_type(b"u63").ok(), Some((false, 63)));
        assert!(field_type(b"i0").is_err());
        assert!(field_type(b"I8").is_err());
        assert_eq!(field_type(b"i8\0junk").ok(), Some((true, 8)));
    }
}
