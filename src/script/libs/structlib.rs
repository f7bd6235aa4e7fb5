//! `struct`: Roberto Ierusalimschy's struct library (struct.c 1.7) as bundled
//! with Redis 7.0, for an x86-64 build (native little endian, `long` and
//! `size_t` of 8 bytes, `int` of 4, maximum alignment 8).

use mlua::{Lua, Table, Value};

use super::{
    arg_error, c_f64_to_i64, c_f64_to_u64, check_string, error, lib_fn, opt_integer, to_number,
    type_name, Args, LibResult, Out, ResultSink, LUA_MAX_CSTACK,
};

/// Largest `i`/`I` size.
const MAX_INT_SIZE: usize = 32;
/// Default alignment of `!` without a number.
const MAX_ALIGN: usize = 8;

/// Builds the `struct` table.
pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lib_fn(lua, pack)?)?;
    t.raw_set("unpack", lib_fn(lua, unpack)?)?;
    t.raw_set("size", lib_fn(lua, size)?)?;
    Ok(t)
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format string read like a C string (it ends at the first NUL).
struct Format<'a> {
    f: &'a [u8],
    i: usize,
}

impl Format<'_> {
    fn next_opt(&mut self) -> Option<u8> {
        let c = self.f.get(self.i).copied().filter(|&c| c != 0)?;
        self.i += 1;
        Some(c)
    }

    /// `getnum`: a decimal number at the cursor, or `default`.
    fn number(&mut self, default: usize) -> LibResult<usize> {
        let digit = |s: &Self| s.f.get(s.i).copied().filter(u8::is_ascii_digit);
        if digit(self).is_none() {
            return Ok(default);
        }
        let mut a: i32 = 0;
        while let Some(d) = digit(self) {
            let d = i32::from(d - b'0');
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return error("integral size overflow");
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a as usize)
    }

    /// `optsize`: the size of option `opt` (reading its number if any).
    fn opt_size(&mut self, opt: u8) -> LibResult<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let sz = self.number(4)?;
                if sz > MAX_INT_SIZE {
                    return error(format!(
                        "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                sz
            }
            _ => 0,
        })
    }

    /// `controloptions`: endianness, alignment and spaces; anything else is
    /// an invalid option.
    fn control(&mut self, opt: u8, h: &mut Header) -> LibResult<()> {
        match opt {
            b' ' => Ok(()),
            b'>' => {
                h.endian = Endian::Big;
                Ok(())
            }
            b'<' => {
                h.endian = Endian::Little;
                Ok(())
            }
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return error(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
                Ok(())
            }
            _ => {
                let mut msg = b"invalid format option '".to_vec();
                msg.push(opt);
                msg.push(b'\'');
                arg_error(1, msg)
            }
        }
    }
}

/// `gettoalign`: padding before an item of `size` at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

fn is_int_opt(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

/// Argument `i` of `pack` as the C code sees the stack: one nil mark follows
/// the arguments.
fn pack_arg(args: &Args, i: usize) -> LibResult<(Value, &'static str)> {
    if i <= args.len() {
        let v = args.get(i)?;
        let t = type_name(&v);
        Ok((v, t))
    } else if i == args.len() + 1 {
        Ok((Value::Nil, "nil"))
    } else {
        Ok((Value::Nil, "no value"))
    }
}

fn pack_number(lua: &Lua, args: &Args, i: usize) -> LibResult<f64> {
    let (v, t) = pack_arg(args, i)?;
    match to_number(lua, &v)? {
        Some(n) => Ok(n),
        None => arg_error(i as i32, format!("number expected, got {t}")),
    }
}

fn pack(lua: &Lua, args: &Args) -> LibResult<Out> {
    let fmt = check_string(lua, args, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header::new();
    let mut arg = 2;
    let mut total: usize = 0;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = f.next_opt() {
        let mut size = f.opt_size(opt)?;
        let pad = to_align(total, &h, opt, size);
        total = total.wrapping_add(pad);
        out.resize(out.len() + pad, 0);
        match opt {
            _ if is_int_opt(opt) => {
                let n = pack_number(lua, args, arg)?;
                arg += 1;
                let mut value = if n < 0.0 {
                    c_f64_to_i64(n) as u64
                } else {
                    c_f64_to_u64(n)
                };
                let mut buf = [0u8; MAX_INT_SIZE];
                for k in 0..size {
                    let idx = if h.endian == Endian::Little {
                        k
                    } else {
                        size - 1 - k
                    };
                    buf[idx] = value as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&buf[..size]);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = pack_number(lua, args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'd' => {
                let v = pack_number(lua, args, arg)?;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let (v, t) = pack_arg(args, arg)?;
                let s = match &v {
                    Value::String(_) | Value::Integer(_) | Value::Number(_) => {
                        lua.coerce_string(v.clone())?
                    }
                    _ => None,
                };
                let Some(s) = s else {
                    return arg_error(arg as i32, format!("string expected, got {t}"));
                };
                arg += 1;
                let s = s.as_bytes();
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code reports the argument after the string.
                    return arg_error(arg as i32, "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => f.control(opt, &mut h)?,
        }
        total = total.wrapping_add(size);
    }
    Out::one(Value::String(lua.create_string(&out)?))
}

/// `getinteger`: `size` bytes as an unsigned or sign-extended integer (only
/// the last 8 bytes matter, as in the C code's 64-bit accumulator).
fn get_integer(buf: &[u8], endian: Endian, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut take = |b: &u8| l = (l << 8) | u64::from(*b);
    match endian {
        Endian::Big => buf.iter().for_each(&mut take),
        Endian::Little => buf.iter().rev().for_each(&mut take),
    }
    if !signed {
        return l as f64;
    }
    // The shift count wraps modulo 64 like x86's shl.
    let mask = (!0u64).wrapping_shl((buf.len() as u32).wrapping_mul(8).wrapping_sub(1));
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &Args) -> LibResult<Out> {
    let fmt = check_string(lua, args, 1)?;
    let fmt = fmt.as_bytes();
    let data = check_string(lua, args, 2)?;
    let data = data.as_bytes();
    let ld = data.len();
    let mut pos = opt_integer(lua, args, 3, 1)? as u64 as usize;
    if pos == 0 {
        return arg_error(3, "offset must be 1 or greater");
    }
    pos -= 1;
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header::new();
    let mut results = ResultSink::new();
    let too_short = || arg_error(2, "data string too short");
    while let Some(opt) = f.next_opt() {
        let mut size = f.opt_size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return too_short();
        }
        if args.len() + results.len() + 2 > LUA_MAX_CSTACK {
            return error("stack overflow (too many results)");
        }
        match opt {
            _ if is_int_opt(opt) => {
                let v = get_integer(&data[pos..pos + size], h.endian, opt.is_ascii_lowercase());
                results.push(lua, Value::Number(v))?;
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                results.push(lua, Value::Number(f64::from(v)))?;
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                results.push(lua, Value::Number(v))?;
            }
            b'c' => {
                if size == 0 {
                    let last = results.last()?;
                    let n = if results.len() == 0 {
                        None
                    } else {
                        to_number(lua, &last)?
                    };
                    let Some(n) = n else {
                        return error("format 'c0' needs a previous size");
                    };
                    size = c_f64_to_u64(n) as usize;
                    results.pop()?;
                    if !(size <= ld && pos <= ld - size) {
                        return too_short();
                    }
                }
                results.push(
                    lua,
                    Value::String(lua.create_string(&data[pos..pos + size])?),
                )?;
            }
            b's' => {
                let Some(nul) = data[pos..].iter().position(|&b| b == 0) else {
                    return error("unfinished string in data");
                };
                size = nul + 1;
                results.push(
                    lua,
                    Value::String(lua.create_string(&data[pos..pos + nul])?),
                )?;
            }
            _ => f.control(opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(lua, Value::Number(pos.wrapping_add(1) as i64 as f64))?;
    Ok(results.into_out())
}

fn size(lua: &Lua, args: &Args) -> LibResult<Out> {
    let fmt = check_string(lua, args, 1)?;
    let fmt = fmt.as_bytes();
    let mut f = Format { f: &fmt, i: 0 };
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = f.next_opt() {
        let size = f.opt_size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return arg_error(1, "option 's' has no fixed size");
        } else if opt == b'c' && size == 0 {
            return arg_error(1, "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Out::one(Value::Number(pos as i64 as f64))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_all;

    const PRE: &str = "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end \
        local function bin(h) return (h:gsub('..', function(x) return string.char(tonumber(x, 16)) end)) end \
        local function j(...) local t = {...} for i=1,select('#', ...) do t[i] = tostring(t[i]) end return table.concat(t, ' ') end ";

    fn with(cases: &[(&str, &str)]) {
        let full: Vec<(String, &str)> = cases
            .iter()
            .map(|(c, w)| (format!("{PRE}{c}"), *w))
            .collect();
        let refs: Vec<(&str, &str)> = full.iter().map(|(c, w)| (c.as_str(), *w)).collect();
        check_all(&refs);
    }

    #[test]
    fn pack_matches_redis() {
        with(&[
            (
                "return hex(struct.pack('>bBhHlLTiI', -1, 255, -2, 65535, -3, 2^40, 7, -4, 5))",
                "fffffffefffffffffffffffffffd00000100000000000000000000000007fffffffc00000005",
            ),
            (
                "return hex(struct.pack('<hHi3I5', -2, 258, -5, 2^33+1))",
                "feff0201fbffff0100000002",
            ),
            ("return hex(struct.pack('!4bi', 1, 2))", "0100000002000000"),
            (
                "return hex(struct.pack('!bd', 1, 1.5))",
                "0100000000000000000000000000f83f",
            ),
            (
                "return hex(struct.pack('<fd', 1.5, 0.1))",
                "0000c03f9a9999999999b93f",
            ),
            (
                "return hex(struct.pack('>fd', 1.5, 0.1))",
                "3fc000003fb999999999999a",
            ),
            (
                "return hex(struct.pack('c3sxc0', 'abcdef', 'hi', 'zz'))",
                "616263686900007a7a",
            ),
            (
                "return hex(struct.pack('c5', 'ab'))",
                "ERR:user_script:1: bad argument #3 to 'pack' (string too short)",
            ),
            ("return hex(struct.pack('>L', 2^64))", "0000000000000000"),
            ("return hex(struct.pack('>L', 0/0))", "8000000000000000"),
            (
                "return hex(struct.pack('>l', -2^63-5000))",
                "8000000000000000",
            ),
            (
                "return hex(struct.pack('>L', 2^63+2048))",
                "8000000000000800",
            ),
            (
                "return hex(struct.pack('>i16', -1))",
                "0000000000000000ffffffffffffffff",
            ),
            (
                "return hex(struct.pack('<i10', 2^62))",
                "00000000000000400000",
            ),
            (
                "return hex(struct.pack('i33', 1))",
                "ERR:user_script:1: integral size 33 is larger than limit of 32",
            ),
            (
                "return hex(struct.pack('z', 1))",
                "ERR:user_script:1: bad argument #1 to 'pack' (invalid format option 'z')",
            ),
            (
                "return hex(struct.pack('!3b', 1))",
                "ERR:user_script:1: alignment 3 is not a power of 2",
            ),
            (
                "return hex(struct.pack('i99999999999', 1))",
                "ERR:user_script:1: integral size overflow",
            ),
            (
                "return hex(struct.pack('b'))",
                "ERR:user_script:1: bad argument #2 to 'pack' (number expected, got nil)",
            ),
            (
                "return hex(struct.pack('b', 'x'))",
                "ERR:user_script:1: bad argument #2 to 'pack' (number expected, got string)",
            ),
            ("return hex(struct.pack('b', '12'))", "0c"),
            (
                "return hex(struct.pack())",
                "ERR:user_script:1: bad argument #1 to 'pack' (string expected, got no value)",
            ),
            (
                "return hex(struct.pack(12, 1))",
                "ERR:user_script:1: bad argument #1 to 'pack' (invalid format option '1')",
            ),
            ("return hex(struct.pack(' < b  > h', 1, 2))", "010002"),
            (
                "return hex(struct.pack('!h b !2 h i', 1, 2, 3, 4))",
                "01000200030004000000",
            ),
            ("return hex(struct.pack('!i3h', 1, 2))", "0000010000000200"),
            (
                "return select(2, pcall(struct.pack, 'bbb', 1))",
                "bad argument #3 to '?' (number expected, got nil)",
            ),
            (
                "return select(2, pcall(struct.pack, 'bs', 1))",
                "bad argument #3 to '?' (string expected, got nil)",
            ),
        ]);
    }

    #[test]
    fn unpack_and_size_match_redis() {
        with(&[
            (
                "return j(struct.unpack('>bBhHlLTiI', bin('fffffffefffffffffffffffffffd00000100000000000000000000000007fffffffc00000005')))",
                "-1 255 -2 65535 -3 1099511627776 7 -4 5 39",
            ),
            ("return j(struct.unpack('<i3I5', bin('fbffff0100000002')))", "-5 8589934593 9"),
            ("return j(struct.unpack('<fd', bin('0000c03f9a9999999999b93f')))", "1.5 0.1 13"),
            ("return j(struct.unpack('c3sxc0', 'abchi' .. bin('0000') .. 'zz'))", "ERR:user_script:1: format 'c0' needs a previous size"),
            ("return j(struct.unpack('bc0', bin('03') .. 'abcd'))", "abc 5"),
            ("return j(struct.unpack('c1c0', '3abcd'))", "abc 5"),
            ("return j(struct.unpack('c0', 'abc'))", "ERR:user_script:1: format 'c0' needs a previous size"),
            ("return j(struct.unpack('c1c0', 'xabc'))", "ERR:user_script:1: format 'c0' needs a previous size"),
            ("return j(struct.unpack('bc0', bin('09') .. 'ab'))", "ERR:user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return j(struct.unpack('s', 'abc'))", "ERR:user_script:1: unfinished string in data"),
            ("return j(struct.unpack('i4', 'abc'))", "ERR:user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return j(struct.unpack('b', 'abc', 3))", "99 4"),
            ("return j(struct.unpack('b', 'abc', 4))", "ERR:user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return j(struct.unpack('b', 'abc', 0))", "ERR:user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)"),
            ("return j(struct.unpack('', 'abc', -5))", "-5"),
            ("return j(struct.unpack('>i16', bin('0000000000000000ffffffffffffffff')))", "-1 17"),
            ("return j(struct.unpack('>I9', bin('ffffffffffffffffff')))", "1.844674407371e+19 10"),
            ("return j(struct.unpack('>i9', bin('00ffffffffffffffff')))", "-1 10"),
            ("return j(struct.unpack('>I0i0', ''))", "0 0 1"),
            ("return j(struct.unpack('!4bi', bin('0100000002000000')))", "1 2 9"),
            ("return j(struct.unpack('z', 'abc'))", "ERR:user_script:1: bad argument #1 to 'unpack' (invalid format option 'z')"),
            ("return j(struct.unpack('b'))", "ERR:user_script:1: bad argument #2 to 'unpack' (string expected, got no value)"),
            ("return j(struct.unpack('b', 'a', 'x'))", "ERR:user_script:1: bad argument #3 to 'unpack' (number expected, got string)"),
            ("return j(struct.unpack('>d', bin('7ff8000000000000')))", "nan 9"),
            ("return j(struct.unpack('x', ''))", "ERR:user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return tostring(struct.unpack('>l', '\\128\\0\\0\\0\\0\\0\\0\\0'))", "-9.2233720368548e+18"),
            ("return select(2, struct.unpack('b', 'abc', 2.7))", "3"),
            ("return select('#', struct.unpack(string.rep('b', 7997), string.rep('a', 8000)))", "7998"),
            ("return select(2, pcall(struct.unpack, string.rep('b', 7998), string.rep('a', 8000)))", "stack overflow (too many results)"),
            ("return select(2, pcall(struct.unpack, string.rep('b', 7997), string.rep('a', 8000), 1))", "stack overflow (too many results)"),
            ("return j(struct.size('>bhiLd'), struct.size('!bd'), struct.size('c10'), struct.size('zq'), struct.size('i3!2h'))", "23 16 10 0 6"),
            ("return struct.size('s')", "ERR:user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"),
            ("return struct.size('c0')", "ERR:user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)"),
            ("return struct.size('b?')", "ERR:user_script:1: bad argument #1 to 'size' (invalid format option '?')"),
            ("return struct.size('i40')", "ERR:user_script:1: integral size 40 is larger than limit of 32"),
            ("return struct.size(' !16')", "0"),
            ("return struct.size('c2147483647c2147483647')", "4294967294"),
            ("return struct.size('!0')", "ERR:user_script:1: alignment 0 is not a power of 2"),
            ("return struct.size('x!')", "1"),
        ]);
    }
}
