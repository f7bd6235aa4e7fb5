//! `bit`: LuaBitOp 1.0.2 as bundled with Redis (32-bit operations on Lua
//! numbers).

use mlua::{Lua, Table, Value};

use super::{lib_fn, to_number, type_error, Args, LibResult, Out};

/// Builds the `bit` table.
pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", lib_fn(lua, |lua, a| ret(barg(lua, a, 1)?))?)?;
    t.raw_set("bnot", lib_fn(lua, |lua, a| ret(!barg(lua, a, 1)?))?)?;
    t.raw_set("band", lib_fn(lua, |lua, a| fold(lua, a, |x, y| x & y))?)?;
    t.raw_set("bor", lib_fn(lua, |lua, a| fold(lua, a, |x, y| x | y))?)?;
    t.raw_set("bxor", lib_fn(lua, |lua, a| fold(lua, a, |x, y| x ^ y))?)?;
    t.raw_set(
        "lshift",
        lib_fn(lua, |lua, a| shift(lua, a, |b, n| b << n))?,
    )?;
    t.raw_set(
        "rshift",
        lib_fn(lua, |lua, a| shift(lua, a, |b, n| b >> n))?,
    )?;
    t.raw_set(
        "arshift",
        lib_fn(lua, |lua, a| shift(lua, a, |b, n| ((b as i32) >> n) as u32))?,
    )?;
    t.raw_set(
        "rol",
        lib_fn(lua, |lua, a| shift(lua, a, |b, n| b.rotate_left(n)))?,
    )?;
    t.raw_set(
        "ror",
        lib_fn(lua, |lua, a| shift(lua, a, |b, n| b.rotate_right(n)))?,
    )?;
    t.raw_set(
        "bswap",
        lib_fn(lua, |lua, a| ret(barg(lua, a, 1)?.swap_bytes()))?,
    )?;
    t.raw_set("tohex", lib_fn(lua, tohex)?)?;
    Ok(t)
}

/// Converts argument `i` to 32 bits the way LuaBitOp does: add 2^52+2^51 so
/// the integer part lands in the low mantissa bits, then take those bits
/// (this rounds to nearest-even and wraps modulo 2^32).
fn barg(lua: &Lua, args: &Args, i: usize) -> LibResult<u32> {
    let n = to_number(lua, &args.get(i)?)?;
    let b = to_bits(n.unwrap_or(0.0));
    // LuaBitOp only checks the type when the result is 0 (cheap fast path).
    if b == 0 && n.is_none() {
        return type_error(args, i, "number");
    }
    Ok(b)
}

/// The 2^52+2^51 conversion of a double to its low 32 bits.
fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

/// Returns a 32-bit result as a signed Lua number.
fn ret(b: u32) -> LibResult<Out> {
    Out::one(Value::Number(f64::from(b as i32)))
}

fn fold(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<Out> {
    let mut b = barg(lua, args, 1)?;
    // LuaBitOp converts the arguments from the last one down to the second.
    let mut i = args.len();
    while i > 1 {
        b = op(b, barg(lua, args, i)?);
        i -= 1;
    }
    ret(b)
}

fn shift(lua: &Lua, args: &Args, op: fn(u32, u32) -> u32) -> LibResult<Out> {
    let b = barg(lua, args, 1)?;
    let n = barg(lua, args, 2)? & 31;
    ret(op(b, n))
}

fn tohex(lua: &Lua, args: &Args) -> LibResult<Out> {
    let mut b = barg(lua, args, 1)?;
    let n: i32 = if args.is_none(2) {
        8
    } else {
        barg(lua, args, 2)? as i32
    };
    // Negative widths mean upper case; Redis's build treats -INT_MIN as a
    // large width (clamped to 8) rather than wrapping.
    let (width, digits): (i64, &[u8; 16]) = if n < 0 {
        (-i64::from(n), b"0123456789ABCDEF")
    } else {
        (i64::from(n), b"0123456789abcdef")
    };
    let n = width.min(8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Out::one(Value::String(lua.create_string(&buf[..n])?))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_all;

    #[test]
    fn bit_operations_match_redis() {
        check_all(&[
            ("return tostring(bit.tobit(0xffffffff))", "-1"),
            ("return tostring(bit.tobit(2^32 + 5))", "5"),
            ("return tostring(bit.tobit(1.5))", "2"),
            ("return tostring(bit.tobit(2.5))", "2"),
            ("return tostring(bit.tobit(-1.5))", "-2"),
            ("return tostring(bit.tobit('0x10'))", "16"),
            ("return tostring(bit.tobit(' 12 '))", "12"),
            ("return tostring(bit.bnot(0))", "-1"),
            ("return tostring(bit.band(0xff, 0x0f, 0x3))", "3"),
            ("return tostring(bit.bor(1, 2, 4, 8))", "15"),
            ("return tostring(bit.bxor(0xff, 0x0f))", "240"),
            ("return tostring(bit.lshift(1, 31))", "-2147483648"),
            ("return tostring(bit.lshift(1, 33))", "2"),
            ("return tostring(bit.rshift(-1, 28))", "15"),
            ("return tostring(bit.arshift(-256, 4))", "-16"),
            ("return tostring(bit.rol(0x12345678, 12))", "1164411171"),
            ("return tostring(bit.ror(0x12345678, 12))", "1736516421"),
            ("return tostring(bit.bswap(0x12345678))", "2018915346"),
            ("return bit.tohex(255)", "000000ff"),
            ("return bit.tohex(-1, -4)", "FFFF"),
            ("return bit.tohex(0x1234abcd, 20)", "1234abcd"),
            ("return bit.tohex(5, 0)", ""),
            ("return bit.tohex(0xabc, 2^31)", "00000ABC"),
            ("return bit.tohex(0xabc, '-3')", "ABC"),
            ("return tostring(bit.tobit(2^60+3))", "0"),
            ("return tostring(bit.tobit(0/0))", "0"),
            ("return tostring(bit.tobit(-2^31-0.5))", "-2147483648"),
            (
                "return bit.tobit()",
                "ERR:user_script:1: bad argument #1 to 'tobit' (number expected, got no value)",
            ),
            (
                "return bit.band(1, 'x')",
                "ERR:user_script:1: bad argument #2 to 'band' (number expected, got string)",
            ),
            (
                "return bit.tohex(1, nil)",
                "ERR:user_script:1: bad argument #2 to 'tohex' (number expected, got nil)",
            ),
            (
                "local f = bit.bor return f({})",
                "ERR:user_script:1: bad argument #1 to 'f' (number expected, got table)",
            ),
            (
                "return select(2, pcall(bit.tobit, true))",
                "bad argument #1 to '?' (number expected, got boolean)",
            ),
            (
                "return tostring(bit.band(1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39))",
                "1",
            ),
            (
                "return bit.band(1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,{},37,39)",
                "ERR:user_script:1: bad argument #18 to 'band' (number expected, got table)",
            ),
        ]);
    }
}
