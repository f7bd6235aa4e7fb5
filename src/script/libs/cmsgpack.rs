//! `cmsgpack`: lua-cmsgpack 0.4.0 as bundled with Redis 7.0 (MessagePack
//! `pack`, `unpack`, `unpack_one`, `unpack_limit`).

use mlua::{Lua, Table, Value};

use super::{
    arg_error, c_f64_to_i64, check_integer, check_string, error, lib_fn, number_of, opt_integer,
    Args, Fail, LibResult, Out, Parking, ResultSink, LUA_MAX_CSTACK,
};

/// Tables nested deeper than this encode as nil (survives cycles).
const MAX_NESTING: usize = 16;

/// Builds the `cmsgpack` table.
pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lib_fn(lua, pack)?)?;
    t.raw_set(
        "unpack",
        lib_fn(lua, |lua, a| unpack_full(lua, a, a.len(), 0, 0))?,
    )?;
    t.raw_set(
        "unpack_one",
        lib_fn(lua, |lua, a| {
            let offset = opt_integer(lua, a, 2, 0)?;
            unpack_full(lua, a, 1, 1, offset)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lib_fn(lua, |lua, a| {
            let limit = check_integer(lua, a, 2)?;
            let offset = opt_integer(lua, a, 3, 0)?;
            unpack_full(lua, a, 1, limit, offset)
        })?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

// ===== Encoding =====

fn pack(lua: &Lua, args: &Args) -> LibResult<Out> {
    let nargs = args.len();
    if nargs == 0 {
        return arg_error(0, "MessagePack pack needs input.");
    }
    // The C code first reserves one stack slot per argument.
    if nargs * 2 > LUA_MAX_CSTACK {
        return arg_error(0, "Too many arguments for MessagePack pack.");
    }
    let mut out = Vec::new();
    for i in 1..=nargs {
        encode_value(&mut out, &args.get(i)?, 0)?;
    }
    Out::one(Value::String(lua.create_string(&out)?))
}

fn encode_value(out: &mut Vec<u8>, v: &Value, level: usize) -> LibResult<()> {
    match v {
        Value::Table(t) if level < MAX_NESTING => encode_table(out, t, level),
        Value::String(s) => {
            encode_bytes(out, &s.as_bytes());
            Ok(())
        }
        Value::Boolean(b) => {
            out.push(if *b { 0xc3 } else { 0xc2 });
            Ok(())
        }
        Value::Integer(_) | Value::Number(_) => {
            let n = number_of(v).unwrap_or(0.0);
            let i = c_f64_to_i64(n);
            if !n.is_infinite() && i as f64 == n {
                encode_int(out, i);
            } else {
                encode_double(out, n);
            }
            Ok(())
        }
        _ => {
            out.push(0xc0);
            Ok(())
        }
    }
}

fn encode_bytes(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_double(out: &mut Vec<u8>, d: f64) {
    let f = d as f32;
    if f64::from(f) == d {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

/// The smallest MessagePack integer encoding of `n`.
fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_header(out: &mut Vec<u8>, n: u64, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 65535 {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// An array when the keys are exactly 1..n (n may be 0), else a map.
fn encode_table(out: &mut Vec<u8>, t: &Table, level: usize) -> LibResult<()> {
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    let mut is_array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        // Keys must be positive numbers that survive a cast to C int.
        match number_of(&k) {
            Some(n) if n > 0.0 && !n.is_infinite() && f64::from(super::c_f64_to_i32(n)) == n => {
                max = max.max(n as i64);
                count += 1;
            }
            _ => {
                is_array = false;
                break;
            }
        }
    }
    if is_array && max == count {
        encode_header(out, count as u64, 0x90, 0xdc, 0xdd);
        for i in 1..=count {
            let v: Value = t.raw_get(i)?;
            encode_value(out, &v, level + 1)?;
        }
        return Ok(());
    }
    let mut len: u64 = 0;
    for pair in t.pairs::<Value, Value>() {
        pair?;
        len += 1;
    }
    encode_header(out, len, 0x80, 0xde, 0xdf);
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        encode_value(out, &k, level + 1)?;
        encode_value(out, &v, level + 1)?;
    }
    Ok(())
}

// ===== Decoding =====

/// Why decoding stopped early (`mp_cur` errors), or a raised error.
enum Stop {
    Eof,
    BadFormat,
    Fail(Fail),
}

impl From<Fail> for Stop {
    fn from(f: Fail) -> Self {
        Stop::Fail(f)
    }
}

impl From<mlua::Error> for Stop {
    fn from(e: mlua::Error) -> Self {
        Stop::Fail(Fail::Lua(e))
    }
}

fn stack_overflow(what: &str) -> Stop {
    Stop::Fail(Fail::Error(format!("stack overflow ({what})").into_bytes()))
}

/// `mp_unpack_full`; `base` is the Lua stack top before any result.
fn unpack_full(lua: &Lua, args: &Args, base: usize, limit: i64, offset: i64) -> LibResult<Out> {
    let s = check_string(lua, args, 1)?;
    let bytes = s.as_bytes();
    let len = bytes.len();
    // The C code prints the length where it means the limit.
    if offset < 0 || limit < 0 {
        return error(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ));
    }
    if offset as u64 > len as u64 {
        return error(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        ));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all {
        i64::from(i32::MAX)
    } else {
        limit
    };
    let mut dec = Decoder {
        data: &bytes,
        pos: offset as usize,
    };
    let mut results = ResultSink::new();
    let mut count: i64 = 0;
    while dec.pos < len && count < limit {
        match dec.decode(lua, base + results.len()) {
            Ok(v) => results.push(lua, v)?,
            Err(Stop::Eof) => return error("Missing bytes in input."),
            Err(Stop::BadFormat) => return error("Bad data format in input."),
            Err(Stop::Fail(f)) => return Err(f),
        }
        count += 1;
    }
    if !decode_all {
        if 1 + results.len() + 1 > LUA_MAX_CSTACK {
            return error("stack overflow (in function mp_unpack_full)");
        }
        let next = if dec.pos == len { -1 } else { dec.pos as i64 };
        results.push_front(lua, Value::Integer(next))?;
    }
    Ok(results.into_out())
}

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

/// An open array or map while decoding.
struct Frame {
    is_map: bool,
    remaining: u64,
    next_index: i64,
    have_key: bool,
    /// Lua stack top with this table pushed.
    table_top: usize,
}

impl Decoder<'_> {
    fn need(&self, n: usize) -> Result<(), Stop> {
        if self.data.len() - self.pos < n {
            return Err(Stop::Eof);
        }
        Ok(())
    }

    fn be(&self, at: usize, n: usize) -> u64 {
        self.data[at..at + n]
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    }

    fn bytes(&mut self, lua: &Lua, header: usize, len: u64) -> Result<Value, Stop> {
        if ((self.data.len() - self.pos - header) as u64) < len {
            return Err(Stop::Eof);
        }
        let start = self.pos + header;
        let end = start + len as usize;
        let s = lua.create_string(&self.data[start..end])?;
        self.pos = end;
        Ok(Value::String(s))
    }

    /// Decodes one value with the Lua stack at `top`, iteratively (nesting is
    /// only bounded by the emulated Lua stack), parking ancestors in a table.
    fn decode(&mut self, lua: &Lua, top: usize) -> Result<Value, Stop> {
        let mut frames: Vec<Frame> = Vec::new();
        let mut parking = Parking::new();
        let mut cur_table: Option<Table> = None;
        let mut cur_key = Value::Nil;
        let mut top = top;
        loop {
            let mut value = self.scalar_or_open(
                lua,
                top,
                &mut frames,
                &mut parking,
                &mut cur_table,
                &mut cur_key,
            )?;
            // Deliver finished values upwards until a frame needs another one.
            loop {
                let Some(frame) = frames.last_mut() else {
                    return Ok(value.unwrap_or(Value::Nil));
                };
                if let Some(v) = value.take() {
                    let table = cur_table.as_ref().ok_or(Stop::BadFormat)?;
                    if !frame.is_map {
                        table.raw_set(frame.next_index, v)?;
                        frame.next_index += 1;
                    } else if !frame.have_key {
                        cur_key = v;
                        frame.have_key = true;
                        top = frame.table_top + 1;
                        break;
                    } else {
                        match &cur_key {
                            Value::Nil => {
                                return Err(Fail::Plain(b"table index is nil".to_vec()).into())
                            }
                            k if number_of(k).is_some_and(f64::is_nan) => {
                                return Err(Fail::Plain(b"table index is NaN".to_vec()).into())
                            }
                            _ => {}
                        }
                        table.raw_set(std::mem::take(&mut cur_key), v)?;
                        frame.have_key = false;
                    }
                }
                if frame.remaining == 0 {
                    frames.pop();
                    value = cur_table.take().map(Value::Table);
                    cur_key = Value::Nil;
                    if !frames.is_empty() {
                        let slot = 2 * frames.len();
                        if let Value::Table(t) = parking.take(slot - 1)? {
                            cur_table = Some(t);
                        }
                        cur_key = parking.take(slot)?;
                    }
                    continue;
                }
                frame.remaining -= 1;
                // Arrays push the index before the element; maps decode the
                // key right above the table.
                top = frame.table_top + usize::from(!frame.is_map);
                break;
            }
        }
    }

    /// Decodes a scalar, or opens an array/map (returning `None`).
    fn scalar_or_open(
        &mut self,
        lua: &Lua,
        top: usize,
        frames: &mut Vec<Frame>,
        parking: &mut Parking,
        cur_table: &mut Option<Table>,
        cur_key: &mut Value,
    ) -> Result<Option<Value>, Stop> {
        self.need(1)?;
        if top + 1 > LUA_MAX_CSTACK {
            return Err(stack_overflow(
                "too many return values at once; use unpack_one or unpack_limit instead.",
            ));
        }
        let p = self.pos;
        let b = self.data[p];
        let (container, len): (Option<bool>, u64) = match b {
            0xcc | 0xd0 => {
                self.need(2)?;
                let v = if b == 0xcc {
                    f64::from(self.data[p + 1])
                } else {
                    f64::from(self.data[p + 1] as i8)
                };
                self.pos += 2;
                return Ok(Some(Value::Number(v)));
            }
            0xcd | 0xd1 => {
                self.need(3)?;
                let raw = self.be(p + 1, 2) as u16;
                let v = if b == 0xcd {
                    f64::from(raw)
                } else {
                    f64::from(raw as i16)
                };
                self.pos += 3;
                return Ok(Some(Value::Number(v)));
            }
            0xce | 0xd2 => {
                self.need(5)?;
                let raw = self.be(p + 1, 4) as u32;
                let v = if b == 0xce {
                    f64::from(raw)
                } else {
                    f64::from(raw as i32)
                };
                self.pos += 5;
                return Ok(Some(Value::Number(v)));
            }
            0xcf | 0xd3 => {
                self.need(9)?;
                // Both become a signed 64-bit integer first (lua_pushinteger).
                let v = self.be(p + 1, 8) as i64 as f64;
                self.pos += 9;
                return Ok(Some(Value::Number(v)));
            }
            0xc0 => {
                self.pos += 1;
                return Ok(Some(Value::Nil));
            }
            0xc2 | 0xc3 => {
                self.pos += 1;
                return Ok(Some(Value::Boolean(b == 0xc3)));
            }
            0xca => {
                self.need(5)?;
                let v = f32::from_bits(self.be(p + 1, 4) as u32);
                self.pos += 5;
                return Ok(Some(Value::Number(f64::from(v))));
            }
            0xcb => {
                self.need(9)?;
                let v = f64::from_bits(self.be(p + 1, 8));
                self.pos += 9;
                return Ok(Some(Value::Number(v)));
            }
            0xd9 => {
                self.need(2)?;
                let l = self.be(p + 1, 1);
                return Ok(Some(self.bytes(lua, 2, l)?));
            }
            0xda => {
                self.need(3)?;
                let l = self.be(p + 1, 2);
                return Ok(Some(self.bytes(lua, 3, l)?));
            }
            0xdb => {
                self.need(5)?;
                let l = self.be(p + 1, 4);
                return Ok(Some(self.bytes(lua, 5, l)?));
            }
            0xdc | 0xde => {
                self.need(3)?;
                let l = self.be(p + 1, 2);
                self.pos += 3;
                (Some(b == 0xde), l)
            }
            0xdd | 0xdf => {
                self.need(5)?;
                let l = self.be(p + 1, 4);
                self.pos += 5;
                (Some(b == 0xdf), l)
            }
            _ if b & 0x80 == 0 => {
                self.pos += 1;
                return Ok(Some(Value::Number(f64::from(b))));
            }
            _ if b & 0xe0 == 0xe0 => {
                self.pos += 1;
                return Ok(Some(Value::Number(f64::from(b as i8))));
            }
            _ if b & 0xe0 == 0xa0 => {
                return Ok(Some(self.bytes(lua, 1, u64::from(b & 0x1f))?));
            }
            _ if b & 0xf0 == 0x90 || b & 0xf0 == 0x80 => {
                self.pos += 1;
                (Some(b & 0xf0 == 0x80), u64::from(b & 0x0f))
            }
            _ => return Err(Stop::BadFormat),
        };
        let is_map = container.unwrap_or(false);
        let table_top = top + 1;
        if !is_map && table_top + 1 > LUA_MAX_CSTACK {
            return Err(stack_overflow("in function mp_decode_to_lua_array"));
        }
        let table = lua.create_table()?;
        if let Some(parent) = cur_table.take() {
            let slot = 2 * frames.len();
            parking.put(lua, slot - 1, Value::Table(parent))?;
            parking.put(lua, slot, std::mem::take(cur_key))?;
        }
        *cur_table = Some(table);
        *cur_key = Value::Nil;
        frames.push(Frame {
            is_map,
            remaining: len,
            next_index: 1,
            have_key: false,
            table_top,
        });
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_all;

    const HEX: &str = "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end ";
    const SHOW: &str = "local function show(...) local n = select('#', ...) local o = {} for i=1,n do local v = select(i, ...) \
        if type(v) == 'table' then o[#o+1] = cjson.encode(v) else o[#o+1] = type(v) .. ':' .. tostring(v) end end \
        return table.concat(o, ' ') end local function bin(h) return (h:gsub('..', function(x) return string.char(tonumber(x, 16)) end)) end ";

    fn with(prefix: &str, cases: &[(&str, &str)]) {
        let full: Vec<(String, &str)> = cases
            .iter()
            .map(|(c, w)| (format!("{prefix}{c}"), *w))
            .collect();
        let refs: Vec<(&str, &str)> = full.iter().map(|(c, w)| (c.as_str(), *w)).collect();
        check_all(&refs);
    }

    #[test]
    fn pack_matches_redis() {
        with(HEX, &[
            (
                "return hex(cmsgpack.pack(0, 127, 128, 255, 256, 65535, 65536, 2^32-1, 2^32, -1, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31-1))",
                "007fcc80ccffcd0100cdffffce00010000ceffffffffcf0000000100000000ffe0d0dfd080d1ff7fd18000d2ffff7fffd280000000d3ffffffff7fffffff",
            ),
            (
                "return hex(cmsgpack.pack(1.5, 0.1, 1/0, -1/0, 2^63, -2^63, 2^64, 1e300, -0.0))",
                "ca3fc00000cb3fb999999999999aca7f800000caff800000ca5f000000d38000000000000000ca5f800000cb7e37e43c8800759c00",
            ),
            ("return hex(cmsgpack.pack(0/0))", "cbfff8000000000000"),
            ("return hex(cmsgpack.pack({1,2,3}, {}, {a=1}, {[1]=1,[3]=3}, true, false, nil, 'abc'))", "930102039081a161018201010303c3c2c0a3616263"),
            (
                "return hex(cmsgpack.pack(string.rep('x', 31), string.rep('y', 32)))",
                "bf78787878787878787878787878787878787878787878787878787878787878d9207979797979797979797979797979797979797979797979797979797979797979",
            ),
            ("return hex(cmsgpack.pack(string.rep('z', 256)):sub(1,10))", "da01007a7a7a7a7a7a7a"),
            ("return hex(cmsgpack.pack(string.rep('z', 65536)):sub(1,12))", "db000100007a7a7a7a7a7a7a"),
            ("local t = {} for i=1,16 do t[i]=i end return hex(cmsgpack.pack(t))", "dc00100102030405060708090a0b0c0d0e0f10"),
            ("local t = {} t[1] = t return hex(cmsgpack.pack(t))", "91919191919191919191919191919191c0"),
            ("return hex(cmsgpack.pack(type, cjson.null))", "c0c0"),
            ("return hex(cmsgpack.pack({[1.5]=1}, {[0]=1}, {[2^31]=1}))", "81ca3fc000000181000181ce8000000001"),
            ("return cmsgpack.pack()", "ERR:user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)"),
            (
                "local t = {} for i=1,4001 do t[i]=i end return select(2, pcall(cmsgpack.pack, unpack(t)))",
                "bad argument #0 to '?' (Too many arguments for MessagePack pack.)",
            ),
            ("local t = {} for i=1,4000 do t[i]=i end return #cmsgpack.pack(unpack(t))", "11618"),
            (
                "return cmsgpack._NAME .. '|' .. cmsgpack._VERSION .. '|' .. cmsgpack._COPYRIGHT .. '|' .. cmsgpack._DESCRIPTION",
                "cmsgpack|lua-cmsgpack 0.4.0|Copyright (C) 2012, Salvatore Sanfilippo|MessagePack C implementation for Lua",
            ),
        ]);
    }

    #[test]
    fn unpack_matches_redis() {
        with(SHOW, &[
            (
                "return show(cmsgpack.unpack(cmsgpack.pack(1, -1, 'x', true, false, 1.5, {1,2}, {a={b=1}})))",
                "number:1 number:-1 string:x boolean:true boolean:false number:1.5 [1,2] {\"a\":{\"b\":1}}",
            ),
            ("return show(cmsgpack.unpack(bin('cfffffffffffffffff')))", "number:-1"),
            ("return show(cmsgpack.unpack(bin('d3fffffffffffffffe')))", "number:-2"),
            (
                "return show(cmsgpack.unpack(bin('ceffffffffd280000000d18000d080cdffffcc80')))",
                "number:4294967295 number:-2147483648 number:-32768 number:-128 number:65535 number:128",
            ),
            ("return show(cmsgpack.unpack(bin('ca3fc00000cb3fb999999999999a')))", "number:1.5 number:0.1"),
            ("return show(cmsgpack.unpack(bin('c001')))", "nil:nil number:1"),
            ("return show(cmsgpack.unpack(bin('92c001')))", "[null,1]"),
            ("return show(cmsgpack.unpack(bin('81c001')))", "ERR:table index is nil"),
            ("return show(cmsgpack.unpack(bin('81cb7ff800000000000001')))", "ERR:table index is NaN"),
            ("return show(cmsgpack.unpack(bin('8101c0')))", "{}"),
            ("return show(cmsgpack.unpack(bin('c1')))", "ERR:user_script:1: Bad data format in input."),
            ("return show(cmsgpack.unpack(bin('c40161')))", "ERR:user_script:1: Bad data format in input."),
            ("return show(cmsgpack.unpack(bin('9301')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('a36162')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('dbffffffff6162')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('d9')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('dc0002')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('de000101a178')))", "[\"x\"]"),
            ("return show(cmsgpack.unpack(bin('df0000000190')))", "ERR:user_script:1: Missing bytes in input."),
            ("return show(cmsgpack.unpack(bin('e0ff7f')))", "number:-32 number:-1 number:127"),
            ("return show(cmsgpack.unpack(bin('dd00000000')))", "{}"),
            ("return show(cmsgpack.unpack(''))", ""),
            ("return show(cmsgpack.unpack_one(''))", "number:-1"),
            ("return show(cmsgpack.unpack_one(bin('010203')))", "number:1 number:1"),
            ("return show(cmsgpack.unpack_one(bin('010203'), 2))", "number:-1 number:3"),
            ("return show(cmsgpack.unpack_one(bin('010203'), 3))", "number:-1"),
            ("return show(cmsgpack.unpack_one(bin('010203'), 4))", "ERR:user_script:1: Start offset 4 greater than input length 3."),
            ("return show(cmsgpack.unpack_one(bin('010203'), 2^40))", "ERR:user_script:1: Start offset 0 greater than input length 3."),
            ("return show(cmsgpack.unpack_limit(bin('010203'), 2))", "number:2 number:1 number:2"),
            ("return show(cmsgpack.unpack_limit(bin('010203'), 0))", "number:1 number:2 number:3"),
            ("return show(cmsgpack.unpack_limit(bin('010203'), 0, 1))", "number:1"),
            (
                "return show(cmsgpack.unpack_limit(bin('010203'), -1))",
                "ERR:user_script:1: Invalid request to unpack with offset of 0 and limit of 3.",
            ),
            (
                "return show(cmsgpack.unpack_one(bin('010203'), -1))",
                "ERR:user_script:1: Invalid request to unpack with offset of -1 and limit of 3.",
            ),
            ("return show(cmsgpack.unpack_limit('x'))", "ERR:user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value)"),
            ("return show(cmsgpack.unpack_one('x', 'y'))", "ERR:user_script:1: bad argument #2 to 'unpack_one' (number expected, got string)"),
            ("return show(cmsgpack.unpack())", "ERR:user_script:1: bad argument #1 to 'unpack' (string expected, got no value)"),
            ("return show(cmsgpack.unpack(123))", "number:49 number:50 number:51"),
            ("return show(cmsgpack.unpack('x', 'y', {}))", "number:120"),
            ("return select('#', cmsgpack.unpack(string.rep(bin('01'), 7998)))", "7998"),
            (
                "return select(2, pcall(cmsgpack.unpack, string.rep(bin('01'), 8100)))",
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ),
            ("return select(2, pcall(cmsgpack.unpack_limit, string.rep(bin('01'), 8100), 7999))", "stack overflow (in function mp_unpack_full)"),
            ("return select('#', cmsgpack.unpack_limit(string.rep(bin('01'), 8100), 7998))", "7999"),
            ("return select(2, pcall(cmsgpack.unpack, string.rep(bin('91'), 5000)))", "stack overflow (in function mp_decode_to_lua_array)"),
            ("return select('#', cmsgpack.unpack(string.rep(bin('91'), 3998) .. bin('90')))", "1"),
            ("return select(2, pcall(cmsgpack.unpack, string.rep(bin('91'), 3999) .. bin('90')))", "stack overflow (in function mp_decode_to_lua_array)"),
            ("return select(2, pcall(cmsgpack.unpack, string.rep(bin('81'), 3000)))", "Missing bytes in input."),
        ]);
    }
}
