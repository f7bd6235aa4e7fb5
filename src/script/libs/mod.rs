//! The Lua libraries Redis preloads for scripts (`cjson`, `bit`, `struct`,
//! `cmsgpack`), written in Rust against Lua 5.1 through mlua.
//!
//! Redis ships these as C modules; scripts observe their exact error strings,
//! including the `user_script:1:` position prefix `luaL_error` adds and the
//! `bad argument #n to 'name'` text `luaL_argerror` derives from the call
//! site. An mlua callback can only raise a Rust error object (a userdata), so
//! every library function here is a small C closure (the *trampoline*) around
//! the Rust implementation: the Rust side returns a tagged failure description
//! and the trampoline raises it with the real Lua auxiliary library, so the
//! error is a plain Lua string exactly as Redis produces it.
//!
//! mlua keeps every live Rust-side handle in one auxiliary Lua stack limited to
//! about 8000 slots, and running out of it panics. The libraries therefore never
//! hold a handle per argument, per result or per nesting level: many arguments
//! and results travel through a Lua table ([`Args`], [`ResultSink`]) and deep
//! traversals park their ancestors in a Lua table instead of Rust variables.

mod bit;
mod cjson;
mod cmsgpack;
mod structlib;

use std::ffi::{c_int, c_void};

use mlua::{ffi, Function, LightUserData, Lua, MultiValue, Table, Value};

/// Registers every library as a global of `lua`.
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.raw_set("cjson", cjson::module(lua)?)?;
    globals.raw_set("bit", bit::module(lua)?)?;
    globals.raw_set("struct", structlib::module(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack::module(lua)?)?;
    Ok(())
}

/// Lua's per-C-function stack limit (LUAI_MAXCSTACK): the C libraries fail
/// with "stack overflow" style errors when they would exceed it, and these
/// ports reproduce those failures by counting the slots the C code would use.
pub(crate) const LUA_MAX_CSTACK: usize = 8000;

/// How a library call fails, mirroring the ways the C libraries raise errors.
pub(crate) enum Fail {
    /// `luaL_error`: the message gets the calling script's position prefix.
    Error(Vec<u8>),
    /// `luaL_argerror(narg, msg)`: "bad argument #narg to 'fn' (msg)".
    Arg(i32, Vec<u8>),
    /// An error the Lua core raises inside a C function, without position.
    Plain(Vec<u8>),
    /// An mlua failure (memory errors and the like), propagated as is.
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

/// Result of a library function body.
pub(crate) type LibResult<T> = Result<T, Fail>;

/// Builds a `luaL_error`-style failure.
pub(crate) fn error<T>(msg: impl Into<Vec<u8>>) -> LibResult<T> {
    Err(Fail::Error(msg.into()))
}

/// Builds a `luaL_argerror`-style failure.
pub(crate) fn arg_error<T>(narg: i32, msg: impl Into<Vec<u8>>) -> LibResult<T> {
    Err(Fail::Arg(narg, msg.into()))
}

// Distinct addresses tagging the trampoline protocol values. Scripts cannot
// forge a light userdata, so these never collide with script values.
static ERR_TAG: u8 = 0;
static PACK_TAG: u8 = 0;

fn tag_ptr(tag: &'static u8) -> *mut c_void {
    tag as *const u8 as *mut c_void
}

fn tag_value(tag: &'static u8) -> Value {
    Value::LightUserData(LightUserData(tag_ptr(tag)))
}

/// Above this many arguments (or results) the trampoline moves them through a
/// table so the Rust side holds one handle instead of one per value.
const DIRECT_MAX: c_int = 16;

/// Failure kinds encoded in the trampoline protocol.
const KIND_ERROR: f64 = 0.0;
const KIND_ARG: f64 = 1.0;

/// The C closure around every library function; upvalue 1 is the mlua
/// function holding the Rust implementation.
///
/// Protocol of the inner function's results: `ERR_TAG, kind, narg, msg`
/// raises an error; `PACK_TAG, table, n` returns `table[1..n]`; anything else
/// is returned as is.
unsafe extern "C-unwind" fn trampoline(l: *mut ffi::lua_State) -> c_int {
    let nargs = ffi::lua_gettop(l);
    if nargs > DIRECT_MAX {
        // Move the arguments into a table; a C function always has
        // LUA_MINSTACK free slots on entry, enough for the few pushes here.
        ffi::lua_createtable(l, nargs, 0);
        for i in 1..=nargs {
            ffi::lua_pushvalue(l, i);
            ffi::lua_rawseti(l, -2, i as _);
        }
        ffi::lua_replace(l, 1);
        ffi::lua_settop(l, 1);
        ffi::lua_pushlightuserdata(l, tag_ptr(&PACK_TAG));
        ffi::lua_insert(l, 1);
        ffi::lua_pushnumber(l, f64::from(nargs));
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, 3, ffi::LUA_MULTRET);
    } else {
        ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
        ffi::lua_insert(l, 1);
        ffi::lua_call(l, nargs, ffi::LUA_MULTRET);
    }
    let nres = ffi::lua_gettop(l);
    if nres >= 1 && ffi::lua_type(l, 1) == ffi::LUA_TLIGHTUSERDATA {
        let tag = ffi::lua_touserdata(l, 1);
        if tag == tag_ptr(&ERR_TAG) && nres >= 4 {
            ffi::lua_checkstack(l, 3);
            let kind = ffi::lua_tonumber(l, 2);
            if kind == KIND_ERROR {
                ffi::luaL_where(l, 1);
                ffi::lua_pushvalue(l, 4);
                ffi::lua_concat(l, 2);
                ffi::lua_error(l);
            } else if kind == KIND_ARG {
                let narg = ffi::lua_tonumber(l, 3) as c_int;
                let msg = ffi::lua_tolstring(l, 4, std::ptr::null_mut());
                return ffi::luaL_argerror(l, narg, msg);
            } else {
                ffi::lua_pushvalue(l, 4);
                ffi::lua_error(l);
            }
        }
        if tag == tag_ptr(&PACK_TAG) && nres >= 3 {
            let n = ffi::lua_tonumber(l, 3) as c_int;
            // Keep only the table so the results get the whole frame, as
            // they had in the C library (its arguments take less room).
            ffi::lua_settop(l, 2);
            ffi::lua_replace(l, 1);
            // (mlua-sys's luaL_checkstack asks for LUA_MINSTACK more slots.)
            if n > 0 && ffi::lua_checkstack(l, n) == 0 {
                ffi::luaL_error(l, c"stack overflow (too many results)".as_ptr());
            }
            for i in 1..=n {
                ffi::lua_rawgeti(l, 1, i as _);
            }
            return n.max(0);
        }
    }
    nres
}

/// Creates a library function from its Rust body (see [`trampoline`]).
pub(crate) fn lib_fn<F>(lua: &Lua, body: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &Args) -> LibResult<Out> + Send + 'static,
{
    let inner = lua.create_function(move |lua, mv: MultiValue| {
        let args = Args::new(mv);
        match body(lua, &args) {
            Ok(Out::Values(values)) => Ok(MultiValue::from_vec(values)),
            Ok(Out::Packed(table, n)) => Ok(MultiValue::from_vec(vec![
                tag_value(&PACK_TAG),
                Value::Table(table),
                Value::Number(n as f64),
            ])),
            Err(Fail::Lua(e)) => Err(e),
            Err(fail) => {
                let (kind, narg, msg) = match fail {
                    Fail::Error(m) => (KIND_ERROR, 0, m),
                    Fail::Arg(n, m) => (KIND_ARG, n, m),
                    Fail::Plain(m) => (2.0, 0, m),
                    Fail::Lua(_) => unreachable!("handled above"),
                };
                Ok(MultiValue::from_vec(vec![
                    tag_value(&ERR_TAG),
                    Value::Number(kind),
                    Value::Number(f64::from(narg)),
                    Value::String(lua.create_string(&msg)?),
                ]))
            }
        }
    })?;
    // SAFETY: pushes one C closure whose single upvalue is the argument the
    // call placed on the stack; the trampoline only uses documented API calls
    // on its own frame.
    unsafe { lua.exec_raw::<Function>(inner, |state| ffi::lua_pushcclosure(state, trampoline, 1)) }
}

/// A raw `next` (lua_next) usable from Rust to resume a table traversal from a
/// saved key; the base library's `next` may be missing or replaced.
pub(crate) fn raw_next_fn(lua: &Lua) -> mlua::Result<Function> {
    unsafe extern "C-unwind" fn raw_next(l: *mut ffi::lua_State) -> c_int {
        ffi::lua_settop(l, 2);
        if ffi::lua_next(l, 1) != 0 {
            2
        } else {
            ffi::lua_pushnil(l);
            1
        }
    }
    // SAFETY: `raw_next` is only called by this crate with a table and a key
    // of that table (or nil), which is what lua_next requires.
    unsafe { lua.create_c_function(raw_next) }
}

/// What a library function returns.
pub(crate) enum Out {
    /// A few values returned directly.
    Values(Vec<Value>),
    /// `table[1..n]`, unpacked by the trampoline.
    Packed(Table, usize),
}

impl Out {
    /// One value.
    pub(crate) fn one(v: Value) -> LibResult<Out> {
        Ok(Out::Values(vec![v]))
    }
}

/// The arguments of a call, directly or through a table for long lists.
pub(crate) struct Args {
    direct: Vec<Value>,
    packed: Option<Table>,
    len: usize,
}

impl Args {
    fn new(mv: MultiValue) -> Args {
        let mut v = mv.into_vec();
        if v.len() == 3 {
            if let (Value::LightUserData(ud), Value::Table(_), Some(n)) =
                (&v[0], &v[1], number_of(&v[2]))
            {
                if ud.0 == tag_ptr(&PACK_TAG) {
                    let len = n as usize;
                    if let Value::Table(t) = v.swap_remove(1) {
                        return Args {
                            direct: Vec::new(),
                            packed: Some(t),
                            len,
                        };
                    }
                }
            }
        }
        let len = v.len();
        Args {
            direct: v,
            packed: None,
            len,
        }
    }

    /// Number of arguments (lua_gettop).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Argument `i` (1-based); nil when absent.
    pub(crate) fn get(&self, i: usize) -> LibResult<Value> {
        if i == 0 || i > self.len {
            return Ok(Value::Nil);
        }
        match &self.packed {
            Some(t) => Ok(t.raw_get(i)?),
            None => Ok(self.direct[i - 1].clone()),
        }
    }

    /// lua_isnone.
    pub(crate) fn is_none(&self, i: usize) -> bool {
        i == 0 || i > self.len
    }

    /// luaL_typename of argument `i` ("no value" when absent).
    pub(crate) fn type_name(&self, i: usize) -> LibResult<&'static str> {
        if self.is_none(i) {
            return Ok("no value");
        }
        Ok(type_name(&self.get(i)?))
    }
}

/// lua_typename of a value.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// The number in a value of Lua type number.
pub(crate) fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// lua_tonumber: numbers, and strings Lua converts to numbers.
pub(crate) fn to_number(lua: &Lua, v: &Value) -> LibResult<Option<f64>> {
    match v {
        Value::Integer(_) | Value::Number(_) => Ok(number_of(v)),
        Value::String(_) => Ok(lua.coerce_number(v.clone())?),
        _ => Ok(None),
    }
}

/// luaL_typerror(narg, tname).
pub(crate) fn type_error<T>(args: &Args, narg: usize, tname: &str) -> LibResult<T> {
    let got = args.type_name(narg)?;
    arg_error(narg as i32, format!("{tname} expected, got {got}"))
}

/// luaL_checknumber.
pub(crate) fn check_number(lua: &Lua, args: &Args, narg: usize) -> LibResult<f64> {
    match to_number(lua, &args.get(narg)?)? {
        Some(n) => Ok(n),
        None => type_error(args, narg, "number"),
    }
}

/// luaL_checkinteger (the double is cast the way C does on x86-64).
pub(crate) fn check_integer(lua: &Lua, args: &Args, narg: usize) -> LibResult<i64> {
    Ok(c_f64_to_i64(check_number(lua, args, narg)?))
}

/// luaL_optinteger.
pub(crate) fn opt_integer(lua: &Lua, args: &Args, narg: usize, default: i64) -> LibResult<i64> {
    match args.get(narg)? {
        Value::Nil => Ok(default),
        _ => check_integer(lua, args, narg),
    }
}

/// luaL_checklstring: strings, and numbers converted to strings.
pub(crate) fn check_string(lua: &Lua, args: &Args, narg: usize) -> LibResult<mlua::LuaString> {
    let v = args.get(narg)?;
    match v {
        Value::String(s) => Ok(s),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(v)? {
            Some(s) => Ok(s),
            None => type_error(args, narg, "string"),
        },
        _ => type_error(args, narg, "string"),
    }
}

/// C's `(int64_t)d` on x86-64: out of range and NaN give INT64_MIN.
pub(crate) fn c_f64_to_i64(d: f64) -> i64 {
    let t = d.trunc();
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
        t as i64
    } else {
        i64::MIN
    }
}

/// C's `(int32_t)d` on x86-64: out of range and NaN give INT32_MIN.
pub(crate) fn c_f64_to_i32(d: f64) -> i32 {
    let t = d.trunc();
    if (-2_147_483_648.0..=2_147_483_647.0).contains(&t) {
        t as i32
    } else {
        i32::MIN
    }
}

/// C's `(uint64_t)d` as gcc compiles it for x86-64.
pub(crate) fn c_f64_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d >= TWO63 {
        (c_f64_to_i64(d - TWO63) as u64) ^ (1 << 63)
    } else {
        c_f64_to_i64(d) as u64
    }
}

/// Collects a function's results: a few stay in a Vec, many spill into a Lua
/// table so the number of live handles stays bounded.
pub(crate) struct ResultSink {
    small: Vec<Value>,
    table: Option<Table>,
    len: usize,
}

const SINK_SMALL: usize = 16;

impl ResultSink {
    /// An empty sink.
    pub(crate) fn new() -> ResultSink {
        ResultSink {
            small: Vec::new(),
            table: None,
            len: 0,
        }
    }

    /// Number of results collected.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends a result.
    pub(crate) fn push(&mut self, lua: &Lua, v: Value) -> LibResult<()> {
        if self.table.is_none() && self.small.len() < SINK_SMALL {
            self.small.push(v);
            self.len += 1;
            return Ok(());
        }
        if self.table.is_none() {
            let t = lua.create_table()?;
            for (i, item) in self.small.drain(..).enumerate() {
                t.raw_set(i + 1, item)?;
            }
            self.table = Some(t);
        }
        self.len += 1;
        if let Some(t) = &self.table {
            t.raw_set(self.len, v)?;
        }
        Ok(())
    }

    /// The last result, if any.
    pub(crate) fn last(&self) -> LibResult<Value> {
        if self.len == 0 {
            return Ok(Value::Nil);
        }
        match &self.table {
            Some(t) => Ok(t.raw_get(self.len)?),
            None => Ok(self.small.last().cloned().unwrap_or(Value::Nil)),
        }
    }

    /// Removes the last result.
    pub(crate) fn pop(&mut self) -> LibResult<()> {
        if self.len == 0 {
            return Ok(());
        }
        match &self.table {
            Some(t) => t.raw_set(self.len, Value::Nil)?,
            None => {
                self.small.pop();
            }
        }
        self.len -= 1;
        Ok(())
    }

    /// Inserts `v` before every collected result.
    pub(crate) fn push_front(&mut self, lua: &Lua, v: Value) -> LibResult<()> {
        match &self.table {
            None if self.small.len() < SINK_SMALL => {
                self.small.insert(0, v);
                self.len += 1;
                Ok(())
            }
            _ => {
                // Rare (long result lists with a leading offset): rebuild.
                let old = std::mem::replace(self, ResultSink::new());
                self.push(lua, v)?;
                for i in 1..=old.len {
                    let item = match &old.table {
                        Some(t) => t.raw_get(i)?,
                        None => old.small[i - 1].clone(),
                    };
                    self.push(lua, item)?;
                }
                Ok(())
            }
        }
    }

    /// The function's return.
    pub(crate) fn into_out(self) -> Out {
        match self.table {
            Some(t) => Out::Packed(t, self.len),
            None => Out::Values(self.small),
        }
    }
}

/// A Lua table used as a stack of values parked by deep traversals.
pub(crate) struct Parking {
    table: Option<Table>,
}

impl Parking {
    /// An empty parking stack (the table is created on first use).
    pub(crate) fn new() -> Parking {
        Parking { table: None }
    }

    /// Stores `v` at slot `i`.
    pub(crate) fn put(&mut self, lua: &Lua, i: usize, v: Value) -> LibResult<()> {
        if self.table.is_none() {
            self.table = Some(lua.create_table()?);
        }
        if let Some(t) = &self.table {
            t.raw_set(i, v)?;
        }
        Ok(())
    }

    /// Removes and returns the value at slot `i`.
    pub(crate) fn take(&mut self, i: usize) -> LibResult<Value> {
        match &self.table {
            Some(t) => {
                let v: Value = t.raw_get(i)?;
                t.raw_set(i, Value::Nil)?;
                Ok(v)
            }
            None => Ok(Value::Nil),
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use mlua::{Lua, StdLib, Value};

    /// A fresh Lua with the safe standard libraries and the Redis libraries.
    pub(crate) fn lua() -> Lua {
        let lua = Lua::new_with(StdLib::ALL_SAFE, mlua::LuaOptions::default())
            .expect("Lua state creation must succeed");
        super::register(&lua).expect("library registration must succeed");
        lua
    }

    /// Runs `code` (named like Redis's scripts) and renders its first result
    /// as a string; a raised error renders as `ERR:<message>`.
    pub(crate) fn run(lua: &Lua, code: &str) -> String {
        let res = lua
            .load(code)
            .set_name("=user_script")
            .eval::<mlua::MultiValue>();
        match res {
            Ok(mv) => match mv.into_iter().next() {
                Some(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                Some(Value::Integer(i)) => i.to_string(),
                Some(Value::Number(n)) => format!("{n}"),
                Some(Value::Boolean(b)) => b.to_string(),
                Some(Value::Nil) | None => "nil".to_string(),
                Some(other) => format!("<{}>", other.type_name()),
            },
            Err(e) => format!("ERR:{}", error_text(&e)),
        }
    }

    fn error_text(e: &mlua::Error) -> String {
        match e {
            // mlua appends a traceback to errors escaping a chunk.
            mlua::Error::RuntimeError(m) => m
                .split("\nstack traceback:")
                .next()
                .unwrap_or("")
                .to_string(),
            mlua::Error::CallbackError { cause, .. } => error_text(cause),
            other => other.to_string(),
        }
    }

    /// Asserts each `(code, expected)` pair (expected taken from Redis 7.0.15,
    /// each script run on a fresh state as after SCRIPT FLUSH).
    pub(crate) fn check_all(cases: &[(&str, &str)]) {
        for (code, want) in cases {
            let lua = lua();
            assert_eq!(run(&lua, code), *want, "script: {code}");
        }
    }

    /// Random inputs never panic (errors are fine): the libraries must
    /// survive hostile scripts.
    #[test]
    fn random_inputs_do_not_panic() {
        let lua = lua();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabets: [&[u8]; 4] = [
            b"[]{}:,\"\\ntrufalse0123456789.eE+-xXpPinfa",
            b"\x90\x91\x80\x81\xdc\xdd\xde\xdf\xd9\xda\xdb\xcc\xcd\xce\xcf\xd0\xd3\xca\xcb\xc0\xc2\xc3\xa1\x01\xff",
            b"<>!248bBhHlLTiIcsxfd0 ",
            b"\x00\x01\x7f\x80\xff\\/\"u",
        ];
        // Calls go through a Lua function: pcall of a C function returning
        // 20+ values trips an API assertion of the debug-built Lua itself.
        let code = "local function p(f, ...) local a = {...} return pcall(function() return select('#', f(unpack(a))) end) end \
            p(cjson.decode, s) p(cmsgpack.unpack, s) p(cmsgpack.unpack_one, s, 1) \
            p(cmsgpack.unpack_limit, s, 3, 2) p(struct.unpack, s, s) p(struct.unpack, s, s, 3) \
            p(struct.size, s) p(struct.pack, s, 1, 'ab', 2.5, -3, s) \
            local ok, v = pcall(cjson.decode, s) if ok then pcall(cjson.encode, v) pcall(cmsgpack.pack, v) end \
            local ok2, w = p(cmsgpack.unpack_one, s) if ok2 then pcall(cjson.encode, w) end";
        for round in 0..3000 {
            let alphabet = alphabets[round % alphabets.len()];
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let s = lua.create_string(&bytes).expect("string creation");
            lua.globals().set("s", s).expect("global set");
            lua.load(code)
                .exec()
                .expect("pcall-wrapped calls must not raise");
        }
    }
}
