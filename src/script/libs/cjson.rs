//! `cjson`: Lua CJSON 2.1.0 as bundled with Redis 7.0 (encoder, decoder and
//! their configuration functions, with the same output and error texts).

use std::sync::{Arc, Mutex};

use mlua::{Function, LightUserData, Lua, Table, Value};

use super::{
    arg_error, c_f64_to_i32, check_integer, check_string, error, lib_fn, number_of, raw_next_fn,
    type_name, Args, Fail, LibResult, Out, Parking, LUA_MAX_CSTACK,
};

/// Encoder output beyond this fails like an allocation failure would (the C
/// library aborts the whole server instead).
const MAX_OUTPUT_BYTES: usize = 512 << 20;

/// The per-module configuration (`json_config_t`).
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 = error, 1 = emit inf/nan, 2 = emit null.
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    encode_keep_buffer: i32,
    encode_number_precision: i32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            encode_keep_buffer: 1,
            encode_number_precision: 14,
        }
    }
}

type SharedConfig = Arc<Mutex<Config>>;

fn lock(cfg: &SharedConfig) -> std::sync::MutexGuard<'_, Config> {
    // Nothing panics while holding the lock; recover the data regardless.
    cfg.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds the `cjson` table (also what `cjson.new()` returns).
pub(super) fn module(lua: &Lua) -> mlua::Result<Table> {
    let cfg: SharedConfig = Arc::new(Mutex::new(Config::default()));
    let next = raw_next_fn(lua)?;
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lib_fn(lua, move |lua, a| {
            let cfg = *lock(&c);
            encode(lua, cfg, &next, a)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lib_fn(lua, move |lua, a| {
            let cfg = *lock(&c);
            decode(lua, cfg, a)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_sparse_array",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 3)?;
            let convert = enum_option(lua, a, 1, &mut cfg.sparse_convert, None)?;
            let ratio = integer_option(lua, a, 2, &mut cfg.sparse_ratio, 0, i32::MAX)?;
            let safe = integer_option(lua, a, 3, &mut cfg.sparse_safe, 0, i32::MAX)?;
            Ok(Out::Values(vec![convert, ratio, safe]))
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(integer_option(
                lua,
                a,
                1,
                &mut cfg.encode_max_depth,
                1,
                i32::MAX,
            )?)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(integer_option(
                lua,
                a,
                1,
                &mut cfg.decode_max_depth,
                1,
                i32::MAX,
            )?)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(integer_option(
                lua,
                a,
                1,
                &mut cfg.encode_number_precision,
                1,
                14,
            )?)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(enum_option(lua, a, 1, &mut cfg.encode_keep_buffer, None)?)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(enum_option(
                lua,
                a,
                1,
                &mut cfg.encode_invalid_numbers,
                Some(&["off", "on", "null"]),
            )?)
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "decode_invalid_numbers",
        lib_fn(lua, move |lua, a| {
            let mut cfg = lock(&c);
            arg_init(a, 1)?;
            Out::one(enum_option(
                lua,
                a,
                1,
                &mut cfg.decode_invalid_numbers,
                None,
            )?)
        })?,
    )?;
    t.raw_set(
        "new",
        lib_fn(lua, |lua, _| Out::one(Value::Table(module(lua)?)))?,
    )?;
    t.raw_set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

// ===== Configuration =====

/// `json_arg_init`: at most `n` arguments (missing ones read as nil).
fn arg_init(args: &Args, n: usize) -> LibResult<()> {
    if args.len() > n {
        return arg_error(n as i32 + 1, "found too many arguments");
    }
    Ok(())
}

/// `json_integer_option`: sets `setting` from argument `idx` when given and
/// returns the (new) setting.
fn integer_option(
    lua: &Lua,
    args: &Args,
    idx: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
) -> LibResult<Value> {
    if !matches!(args.get(idx)?, Value::Nil) {
        // The C code stores luaL_checkinteger's result in an int.
        let value = check_integer(lua, args, idx)? as i32;
        if !(min <= value && value <= max) {
            // The C code always blames argument 1 for the range.
            return arg_error(1, format!("expected integer between {min} and {max}"));
        }
        *setting = value;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// `json_enum_option` with `bool_true` = 1: booleans or option names set
/// `setting`; the result is a boolean for off/on and the name otherwise.
fn enum_option(
    lua: &Lua,
    args: &Args,
    idx: usize,
    setting: &mut i32,
    options: Option<&[&str]>,
) -> LibResult<Value> {
    let options = options.unwrap_or(&["off", "on"]);
    match args.get(idx)? {
        Value::Nil => {}
        Value::Boolean(b) => *setting = i32::from(b),
        _ => {
            let name = check_string(lua, args, idx)?;
            let name = name.as_bytes();
            match options.iter().position(|o| o.as_bytes() == &name[..]) {
                Some(i) => *setting = i as i32,
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    // luaL_checkoption prints the name as a C string.
                    msg.extend(name.iter().take_while(|&&b| b != 0));
                    msg.push(b'\'');
                    return arg_error(idx as i32, msg);
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        Ok(Value::Boolean(*setting == 1))
    } else {
        let name = options.get(*setting as usize).copied().unwrap_or("");
        Ok(Value::String(lua.create_string(name)?))
    }
}

// ===== Encoding =====

fn encode(lua: &Lua, cfg: Config, next: &Function, args: &Args) -> LibResult<Out> {
    if args.len() != 1 {
        return arg_error(1, "expected 1 argument");
    }
    let mut enc = Encoder {
        cfg,
        out: Vec::with_capacity(64),
        scratch: String::new(),
    };
    enc.run(lua, next, args.get(1)?)?;
    Out::one(Value::String(lua.create_string(&enc.out)?))
}

/// An open array or object during encoding.
struct Frame {
    /// `Some((len, next index))` for arrays, `None` for objects.
    array: Option<(i64, i64)>,
    /// Whether an object already has a member (for the comma).
    started: bool,
    /// Lua stack slots the C encoder would use with this table on top.
    stack_top: usize,
}

struct Encoder {
    cfg: Config,
    out: Vec<u8>,
    scratch: String,
}

fn serialise_error<T>(what: &str, reason: &str) -> LibResult<T> {
    error(format!("Cannot serialise {what}: {reason}"))
}

impl Encoder {
    /// Encodes `root` depth first like the recursive C encoder, with the open
    /// tables' ancestors parked in a Lua table (see the module docs).
    fn run(&mut self, lua: &Lua, next: &Function, root: Value) -> LibResult<()> {
        let mut frames: Vec<Frame> = Vec::new();
        let mut parking = Parking::new();
        let mut cur_table: Option<Table> = None;
        let mut cur_key = Value::Nil;
        let mut pending = Some(root);
        loop {
            if let Some(value) = pending.take() {
                if let Value::Table(t) = value {
                    let stack_top = match frames.last() {
                        None => 1,
                        Some(f) if f.array.is_some() => f.stack_top + 1,
                        Some(f) => f.stack_top + 2,
                    };
                    let depth = frames.len() + 1;
                    if depth > self.cfg.encode_max_depth as usize || stack_top + 3 > LUA_MAX_CSTACK
                    {
                        return error(format!("Cannot serialise, excessive nesting ({depth})"));
                    }
                    let len = self.array_length(&t)?;
                    if let Some(parent) = cur_table.take() {
                        let slot = 2 * frames.len();
                        parking.put(lua, slot - 1, Value::Table(parent))?;
                        parking.put(lua, slot, std::mem::take(&mut cur_key))?;
                    }
                    if len > 0 {
                        self.out.push(b'[');
                        frames.push(Frame {
                            array: Some((i64::from(len), 1)),
                            started: false,
                            stack_top,
                        });
                    } else {
                        self.out.push(b'{');
                        frames.push(Frame {
                            array: None,
                            started: false,
                            stack_top,
                        });
                    }
                    cur_table = Some(t);
                    cur_key = Value::Nil;
                } else {
                    self.scalar(&value)?;
                }
                if self.out.len() > MAX_OUTPUT_BYTES {
                    return Err(Fail::Plain(b"not enough memory".to_vec()));
                }
            }
            let Some(frame) = frames.last_mut() else {
                break;
            };
            let Some(table) = cur_table.as_ref() else {
                break;
            };
            let finished = match &mut frame.array {
                Some((len, index)) => {
                    if *index > *len {
                        self.out.push(b']');
                        true
                    } else {
                        if *index > 1 {
                            self.out.push(b',');
                        }
                        pending = Some(table.raw_get(*index)?);
                        *index += 1;
                        false
                    }
                }
                None => {
                    let (key, value): (Value, Value) =
                        next.call((table, std::mem::take(&mut cur_key)))?;
                    if matches!(key, Value::Nil) {
                        self.out.push(b'}');
                        true
                    } else {
                        if frame.started {
                            self.out.push(b',');
                        }
                        frame.started = true;
                        match &key {
                            Value::String(s) => {
                                append_string(&mut self.out, &s.as_bytes());
                                self.out.push(b':');
                            }
                            Value::Integer(_) | Value::Number(_) => {
                                self.out.push(b'"');
                                self.number(number_of(&key).unwrap_or(0.0))?;
                                self.out.extend_from_slice(b"\":");
                            }
                            other => {
                                return serialise_error(
                                    type_name(other),
                                    "table key must be a number or string",
                                )
                            }
                        }
                        cur_key = key;
                        pending = Some(value);
                        false
                    }
                }
            };
            if finished {
                frames.pop();
                cur_table = None;
                cur_key = Value::Nil;
                if !frames.is_empty() {
                    let slot = 2 * frames.len();
                    if let Value::Table(t) = parking.take(slot - 1)? {
                        cur_table = Some(t);
                    }
                    cur_key = parking.take(slot)?;
                }
            }
        }
        Ok(())
    }

    /// `lua_array_length`: the array size, or -1 for an object.
    fn array_length(&self, t: &Table) -> LibResult<i32> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        for pair in t.pairs::<Value, Value>() {
            let (key, _) = pair?;
            match number_of(&key) {
                Some(k) if k != 0.0 && k.floor() == k && k >= 1.0 => {
                    // The C code keeps the maximum in an int.
                    if k > f64::from(max) {
                        max = c_f64_to_i32(k);
                    }
                    items = items.wrapping_add(1);
                }
                _ => return Ok(-1),
            }
        }
        let cfg = &self.cfg;
        if cfg.sparse_ratio > 0
            && max > items.wrapping_mul(cfg.sparse_ratio)
            && max > cfg.sparse_safe
        {
            if cfg.sparse_convert == 0 {
                return serialise_error("table", "excessively sparse array");
            }
            return Ok(-1);
        }
        Ok(max)
    }

    fn scalar(&mut self, v: &Value) -> LibResult<()> {
        match v {
            Value::String(s) => append_string(&mut self.out, &s.as_bytes()),
            Value::Integer(_) | Value::Number(_) => self.number(number_of(v).unwrap_or(0.0))?,
            Value::Boolean(true) => self.out.extend_from_slice(b"true"),
            Value::Boolean(false) => self.out.extend_from_slice(b"false"),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(ud) if ud.0.is_null() => self.out.extend_from_slice(b"null"),
            other => return serialise_error(type_name(other), "type not supported"),
        }
        Ok(())
    }

    /// `json_append_number`.
    fn number(&mut self, n: f64) -> LibResult<()> {
        match self.cfg.encode_invalid_numbers {
            0 if !n.is_finite() => return serialise_error("number", "must not be NaN or Inf"),
            0 => {}
            1 => {
                if n.is_nan() {
                    self.out.extend_from_slice(b"nan");
                    return Ok(());
                }
            }
            _ => {
                if !n.is_finite() {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        format_g(
            &mut self.out,
            &mut self.scratch,
            n,
            self.cfg.encode_number_precision,
        );
        Ok(())
    }
}

/// Appends `s` as a JSON string with CJSON's escapes (including `\/` and
/// `\u007f`; bytes >= 0x80 pass through).
fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'/' => b"\\/",
            b'\x08' => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\x0c' => b"\\f",
            b'\r' => b"\\r",
            0..=0x1f | 0x7f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 15)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// printf's `%.<precision>g` (glibc output, precision 1..=14).
fn format_g(out: &mut Vec<u8>, scratch: &mut String, x: f64, precision: i32) {
    use std::fmt::Write;
    if x.is_nan() {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if x.is_infinite() {
        out.extend_from_slice(if x < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    let p = precision.clamp(1, 17) as usize;
    // Integers shorter than the precision print as themselves.
    if x.fract() == 0.0 && x.abs() < 10f64.powi(p as i32) {
        if x == 0.0 && x.is_sign_negative() {
            out.extend_from_slice(b"-0");
        } else {
            scratch.clear();
            let _ = write!(scratch, "{}", x as i64);
            out.extend_from_slice(scratch.as_bytes());
        }
        return;
    }
    // Rust's `{:e}` rounds correctly (like glibc), giving the P significant
    // digits %g starts from.
    scratch.clear();
    let _ = write!(scratch, "{:.*e}", p - 1, x);
    let (mantissa, exp) = scratch.split_once('e').unwrap_or((scratch.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(|b| b.is_ascii_digit()).collect();
    if negative {
        out.push(b'-');
    }
    if exp < -4 || exp >= p as i32 {
        out.push(digits[0]);
        let frac = trim_zeros(&digits[1..]);
        if !frac.is_empty() {
            out.push(b'.');
            out.extend_from_slice(frac);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        out.extend_from_slice(&digits[..int_len]);
        let frac = trim_zeros(&digits[int_len..]);
        if !frac.is_empty() {
            out.push(b'.');
            out.extend_from_slice(frac);
        }
    } else {
        out.extend_from_slice(b"0.");
        for _ in 0..(-exp - 1) {
            out.push(b'0');
        }
        out.extend_from_slice(trim_zeros(&digits));
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let end = d.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1);
    &d[..end]
}

// ===== Decoding =====

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(&self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(what) => what,
        }
    }
}

struct Token {
    tok: Tok,
    /// 0-based offset the error messages report (plus one).
    index: usize,
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    cfg: Config,
    /// The last string token's bytes.
    tmp: Vec<u8>,
}

/// An open array or object during decoding.
struct PFrame {
    is_object: bool,
    next_index: i64,
    key: Vec<u8>,
}

fn decode(lua: &Lua, cfg: Config, args: &Args) -> LibResult<Out> {
    if args.len() != 1 {
        return arg_error(1, "expected 1 argument");
    }
    let text = check_string(lua, args, 1)?;
    let bytes = text.as_bytes();
    if bytes.len() >= 2 && (bytes[0] == 0 || bytes[1] == 0) {
        return error("JSON parser does not support UTF-16 or UTF-32");
    }
    let mut p = Parser {
        s: &bytes,
        pos: 0,
        cfg,
        tmp: Vec::new(),
    };
    let root = p.run(lua)?;
    Out::one(root)
}

fn expected<T>(what: &str, t: &Token) -> LibResult<T> {
    error(format!(
        "Expected {what} but found {} at character {}",
        t.tok.name(),
        t.index + 1
    ))
}

impl Parser<'_> {
    /// The byte at `i`; Lua strings end with a NUL the C parser relies on.
    fn byte(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn run(&mut self, lua: &Lua) -> LibResult<Value> {
        let mut frames: Vec<PFrame> = Vec::new();
        let mut parking = Parking::new();
        let mut cur: Option<Table> = None;
        // Lua stack slots the C parser would use: the argument, plus one per
        // open array (its table) and two per open object (table and key).
        let mut stack_top: usize = 1;
        let t = self.next_token();
        let mut value =
            self.value_or_begin(lua, t, &mut frames, &mut parking, &mut cur, &mut stack_top)?;
        let root = loop {
            match value {
                Some(v) => {
                    let Some(frame) = frames.last_mut() else {
                        break v;
                    };
                    let Some(table) = cur.as_ref() else { break v };
                    if frame.is_object {
                        table.raw_set(lua.create_string(&frame.key)?, v)?;
                    } else {
                        table.raw_set(frame.next_index, v)?;
                        frame.next_index += 1;
                    }
                    let is_object = frame.is_object;
                    let t = self.next_token();
                    let close = if is_object { Tok::ObjEnd } else { Tok::ArrEnd };
                    if t.tok == close {
                        value = Some(close_frame(
                            &mut frames,
                            &mut parking,
                            &mut cur,
                            &mut stack_top,
                        )?);
                        continue;
                    }
                    if t.tok != Tok::Comma {
                        return expected(
                            if is_object {
                                "comma or object end"
                            } else {
                                "comma or array end"
                            },
                            &t,
                        );
                    }
                    let t = self.next_token();
                    value = if is_object {
                        self.member(lua, t, &mut frames, &mut parking, &mut cur, &mut stack_top)?
                    } else {
                        self.value_or_begin(
                            lua,
                            t,
                            &mut frames,
                            &mut parking,
                            &mut cur,
                            &mut stack_top,
                        )?
                    };
                }
                None => {
                    // A container was just opened.
                    let is_object = frames.last().is_some_and(|f| f.is_object);
                    let t = self.next_token();
                    let close = if is_object { Tok::ObjEnd } else { Tok::ArrEnd };
                    value = if t.tok == close {
                        Some(close_frame(
                            &mut frames,
                            &mut parking,
                            &mut cur,
                            &mut stack_top,
                        )?)
                    } else if is_object {
                        self.member(lua, t, &mut frames, &mut parking, &mut cur, &mut stack_top)?
                    } else {
                        self.value_or_begin(
                            lua,
                            t,
                            &mut frames,
                            &mut parking,
                            &mut cur,
                            &mut stack_top,
                        )?
                    };
                }
            }
        };
        let t = self.next_token();
        if t.tok != Tok::End {
            return expected("the end", &t);
        }
        Ok(root)
    }

    /// Parses `key : value` of an object whose first token is `t`.
    fn member(
        &mut self,
        lua: &Lua,
        t: Token,
        frames: &mut Vec<PFrame>,
        parking: &mut Parking,
        cur: &mut Option<Table>,
        stack_top: &mut usize,
    ) -> LibResult<Option<Value>> {
        if t.tok != Tok::Str {
            return expected("object key string", &t);
        }
        if let Some(f) = frames.last_mut() {
            f.key.clear();
            f.key.extend_from_slice(&self.tmp);
        }
        let t = self.next_token();
        if t.tok != Tok::Colon {
            return expected("colon", &t);
        }
        let t = self.next_token();
        self.value_or_begin(lua, t, frames, parking, cur, stack_top)
    }

    /// `json_process_value`: a complete value, or `None` after opening a
    /// container.
    fn value_or_begin(
        &mut self,
        lua: &Lua,
        t: Token,
        frames: &mut Vec<PFrame>,
        parking: &mut Parking,
        cur: &mut Option<Table>,
        stack_top: &mut usize,
    ) -> LibResult<Option<Value>> {
        match t.tok {
            Tok::Str => Ok(Some(Value::String(lua.create_string(&self.tmp)?))),
            Tok::Num(n) => Ok(Some(Value::Number(n))),
            Tok::Bool(b) => Ok(Some(Value::Boolean(b))),
            Tok::Null => Ok(Some(Value::LightUserData(LightUserData(
                std::ptr::null_mut(),
            )))),
            Tok::ObjBegin | Tok::ArrBegin => {
                let is_object = t.tok == Tok::ObjBegin;
                let depth = frames.len() + 1;
                let slots = if is_object { 3 } else { 2 };
                if depth > self.cfg.decode_max_depth as usize || *stack_top + slots > LUA_MAX_CSTACK
                {
                    return error(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        self.pos
                    ));
                }
                let table = lua.create_table()?;
                if let Some(parent) = cur.take() {
                    parking.put(lua, frames.len(), Value::Table(parent))?;
                }
                *cur = Some(table);
                *stack_top += if is_object { 2 } else { 1 };
                frames.push(PFrame {
                    is_object,
                    next_index: 1,
                    key: Vec::new(),
                });
                Ok(None)
            }
            _ => expected("value", &t),
        }
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.byte(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let ch = self.byte(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(tok) = single {
            self.pos += 1;
            return Token { tok, index };
        }
        if ch == 0 {
            return Token {
                tok: Tok::End,
                index,
            };
        }
        if !matches!(
            ch,
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'"' | b'+' | b'-' | b'0'..=b'9'
        ) {
            return self.token_error("invalid token");
        }
        if ch == b'"' {
            return self.string_token(index);
        }
        if ch == b'-' || ch.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && self.is_invalid_number() {
                return self.token_error("invalid number");
            }
            return self.number_token(index);
        }
        let rest = &self.s[self.pos.min(self.s.len())..];
        if rest.starts_with(b"true") {
            self.pos += 4;
            return Token {
                tok: Tok::Bool(true),
                index,
            };
        }
        if rest.starts_with(b"false") {
            self.pos += 5;
            return Token {
                tok: Tok::Bool(false),
                index,
            };
        }
        if rest.starts_with(b"null") {
            self.pos += 4;
            return Token {
                tok: Tok::Null,
                index,
            };
        }
        if self.cfg.decode_invalid_numbers != 0 && self.is_invalid_number() {
            return self.number_token(index);
        }
        self.token_error("invalid token")
    }

    fn token_error(&self, what: &'static str) -> Token {
        Token {
            tok: Tok::Error(what),
            index: self.pos,
        }
    }

    /// `json_is_invalid_number`: forms strtod accepts but JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.byte(p) == b'+' {
            return true;
        }
        if self.byte(p) == b'-' {
            p += 1;
        }
        let c = self.byte(p);
        if c == b'0' {
            let c2 = self.byte(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = &self.s[p.min(self.s.len())..];
        let starts = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        starts(b"inf") || starts(b"nan")
    }

    fn number_token(&mut self, index: usize) -> Token {
        match strtod(&self.s[self.pos.min(self.s.len())..]) {
            Some((n, used)) => {
                self.pos += used;
                Token {
                    tok: Tok::Num(n),
                    index,
                }
            }
            None => self.token_error("invalid number"),
        }
    }

    fn string_token(&mut self, index: usize) -> Token {
        self.pos += 1;
        self.tmp.clear();
        loop {
            let mut ch = self.byte(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.token_error("unexpected end of string");
            }
            if ch == b'\\' {
                let mapped = match self.byte(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 12,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return self.token_error("invalid unicode escape code");
                    }
                    _ => return self.token_error("invalid escape code"),
                };
                self.pos += 1;
                ch = mapped;
            }
            self.tmp.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        Token {
            tok: Tok::Str,
            index,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            let d = (self.byte(at + i) as char).to_digit(16)?;
            v = (v << 4) | d;
        }
        Some(v)
    }

    /// `\uXXXX` (with surrogate pairs) at `pos`, appended as UTF-8.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.byte(self.pos + 6) != b'\\' || self.byte(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        match char::from_u32(cp) {
            Some(c) => self
                .tmp
                .extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
            None => return false,
        }
        self.pos += len;
        true
    }
}

fn close_frame(
    frames: &mut Vec<PFrame>,
    parking: &mut Parking,
    cur: &mut Option<Table>,
    stack_top: &mut usize,
) -> LibResult<Value> {
    let frame = frames.pop();
    *stack_top -= if frame.is_some_and(|f| f.is_object) {
        2
    } else {
        1
    };
    let done = cur.take();
    if !frames.is_empty() {
        if let Value::Table(parent) = parking.take(frames.len())? {
            *cur = Some(parent);
        }
    }
    Ok(done.map_or(Value::Nil, Value::Table))
}

/// glibc `strtod` on the start of `s` (which ends at its first NUL, like a C
/// string): decimal, hexadecimal (`0x1.8p3`), `inf`/`infinity` and
/// `nan`/`nan(...)`, with an optional sign. Returns the value and the bytes
/// used, or `None` when no number starts there.
pub(super) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let negative = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if negative { -v } else { v };
    let rest = &s[i.min(s.len())..];
    let starts = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if starts(b"inf") {
        let used = if starts(b"infinity") { 8 } else { 3 };
        return Some((sign(f64::INFINITY), i + used));
    }
    if starts(b"nan") {
        let mut used = i + 3;
        if at(used) == b'(' {
            let mut j = used + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                used = j + 1;
            }
        }
        return Some((sign(f64::NAN), used));
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, used)) = hex_float(s, i + 2) {
            return Some((sign(v), used));
        }
        // "0x" without hex digits is the number 0 followed by junk.
        return Some((sign(0.0), i + 1));
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'e' {
        let mut j = i + 1;
        if at(j) == b'+' || at(j) == b'-' {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[start..i]).ok()?;
    // Rust's parser rounds correctly like glibc; "1." and ".5" are accepted.
    let v: f64 = text.parse().ok()?;
    Some((sign(v), i))
}

/// The hexadecimal float whose digits start at `i`; `None` without digits.
fn hex_float(s: &[u8], mut i: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let hex = |b: u8| (b as char).to_digit(16);
    let mut mantissa: u64 = 0;
    let mut sticky = false;
    let mut exp2: i64 = 0;
    let mut any = false;
    let mut seen_point = false;
    loop {
        let b = at(i);
        if b == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = hex(b) else { break };
        any = true;
        if mantissa >> 60 == 0 {
            mantissa = (mantissa << 4) | u64::from(d);
            if seen_point {
                exp2 -= 4;
            }
        } else {
            // Digits beyond 64 bits only matter for rounding.
            sticky |= d != 0;
            if !seen_point {
                exp2 += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if (at(i) | 0x20) == b'p' {
        let mut j = i + 1;
        let neg = match at(j) {
            b'-' => {
                j += 1;
                true
            }
            b'+' => {
                j += 1;
                false
            }
            _ => false,
        };
        if at(j).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(1 << 20);
                j += 1;
            }
            exp2 += if neg { -e } else { e };
            i = j;
        }
    }
    Some((scale_binary(mantissa, sticky, exp2), i))
}

/// `mantissa * 2^exp2` (plus a sticky fraction) rounded to nearest even.
fn scale_binary(mantissa: u64, sticky: bool, exp2: i64) -> f64 {
    if mantissa == 0 {
        return 0.0;
    }
    let lz = i64::from(mantissa.leading_zeros());
    let m = mantissa << lz;
    let e = exp2 - lz; // value = m * 2^e, m in [2^63, 2^64)
    let top = e + 63; // value in [2^top, 2^(top+1))
    if top > 1023 {
        return f64::INFINITY;
    }
    // Bits to drop: 11 for normal numbers, more for subnormals.
    let shift = if top >= -1022 { 11 } else { 11 + (-1022 - top) };
    if shift > 64 {
        return 0.0;
    }
    let (mut kept, rem_half, rem_rest) = if shift == 64 {
        (0u64, m >> 63 != 0, (m << 1) != 0 || sticky)
    } else {
        let kept = m >> shift;
        let rem = m & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        (kept, rem & half != 0, (rem & (half - 1)) != 0 || sticky)
    };
    if rem_half && (rem_rest || kept & 1 == 1) {
        kept += 1;
    }
    let scale = e + shift;
    let mut v = kept as f64;
    // Apply 2^scale in exact steps.
    let mut s = scale;
    while s > 0 {
        let step = s.min(1000);
        v *= f64::powi(2.0, step as i32);
        s -= step;
    }
    while s < 0 {
        let step = (-s).min(1000);
        v *= f64::powi(0.5, step as i32);
        s += step;
    }
    v
}

#[cfg(test)]
mod tests;
