//! Conversions between Redis replies and Lua values, with Redis 7.0's rules
//! (`redisProtocolToLuaType` and `luaReplyToRedisReply` in its
//! script_lua.c).

use mlua::{Lua, Value};

use crate::command::error_text;
use crate::reply::Reply;

/// Pushes [`error_table`]'s table.
///
/// # Safety
/// `state` is a Lua state inside a protected call (allocation may raise).
pub(crate) unsafe fn push_error_table(state: *mut mlua::lua_State, text: &str, from_command: bool) {
    use mlua::ffi;
    let full = error_text_with_code(text);
    ffi::luaL_checkstack(state, 3, std::ptr::null());
    ffi::lua_createtable(state, 0, 2);
    ffi::lua_pushstring(state, c"err".as_ptr());
    ffi::lua_pushlstring(state, full.as_ptr().cast(), full.len());
    ffi::lua_rawset(state, -3);
    if from_command {
        ffi::lua_pushstring(state, c"ignore_error_stats_update".as_ptr());
        ffi::lua_pushboolean(state, 1);
        ffi::lua_rawset(state, -3);
    }
}

/// `CODE message` for an error text (Redis's `luaPushErrorBuff`).
fn error_text_with_code(text: &str) -> String {
    let trim = |s: &str| s.trim_matches(|c| c == '\r' || c == '\n').to_string();
    match text.split_once(' ') {
        Some((code, message)) => format!("{code} {}", trim(message)),
        None => format!("ERR {}", trim(text)),
    }
}

/// A pcall-style error table `{err = "CODE message"}` for an error whose
/// text starts with its code (Redis's `luaPushErrorBuff`: no space means
/// the whole text is the message under `ERR`; surrounding CR/LF trimmed).
/// `from_command` adds the `ignore_error_stats_update` field Redis sets on
/// errors of commands the script ran.
pub fn error_table(lua: &Lua, text: &str, from_command: bool) -> mlua::Result<Value> {
    let full = error_text_with_code(text);
    let table = lua.create_table()?;
    table.raw_set("err", full)?;
    if from_command {
        table.raw_set("ignore_error_stats_update", true)?;
    }
    Ok(Value::Table(table))
}

/// Pushes `reply` converted to the Lua value `redis.call` returns, for a
/// script client speaking protocol `resp` (Redis's
/// `redisProtocolToLuaType`).
///
/// # Safety
/// `state` is a Lua state inside a protected call (allocation may raise).
pub(crate) unsafe fn push_reply(state: *mut mlua::lua_State, reply: &Reply, resp: u8) {
    use mlua::ffi;
    let resp3 = resp >= 3;
    ffi::luaL_checkstack(state, 4, std::ptr::null());
    let push_bytes = |b: &[u8]| {
        ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
    };
    let wrap_top = |field: &std::ffi::CStr| {
        // {field = <top>}
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushstring(state, field.as_ptr());
        ffi::lua_pushvalue(state, -3);
        ffi::lua_rawset(state, -3);
        ffi::lua_replace(state, -2);
    };
    match reply {
        Reply::Simple(s) => {
            push_bytes(s.as_bytes());
            wrap_top(c"ok");
        }
        Reply::Error(e) => push_error_table(state, e, true),
        Reply::Int(n) => ffi::lua_pushnumber(state, *n as f64),
        Reply::Bulk(b) => push_bytes(b),
        Reply::Null | Reply::NullArray => {
            if resp3 {
                ffi::lua_pushnil(state)
            } else {
                ffi::lua_pushboolean(state, 0)
            }
        }
        Reply::Array(items) | Reply::Push(items) => push_sequence(state, items, resp),
        Reply::Set(items) => {
            if !resp3 {
                return push_sequence(state, items, resp);
            }
            // Grown from empty as Redis's lua_newtable: the table's layout,
            // and so the order a script's pairs() or the reply sees, is
            // the same.
            ffi::lua_createtable(state, 0, 0);
            for item in items {
                push_reply(state, item, resp);
                if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                    ffi::lua_pop(state, 1);
                    continue;
                }
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, -3);
            }
            wrap_top(c"set");
        }
        Reply::Map(pairs) => {
            if !resp3 {
                ffi::lua_createtable(state, (pairs.len() * 2) as i32, 0);
                for (i, (k, v)) in pairs.iter().enumerate() {
                    push_reply(state, k, resp);
                    ffi::lua_rawseti(state, -2, (2 * i + 1) as _);
                    push_reply(state, v, resp);
                    ffi::lua_rawseti(state, -2, (2 * i + 2) as _);
                }
                return;
            }
            ffi::lua_createtable(state, 0, 0);
            for (k, v) in pairs {
                push_reply(state, k, resp);
                if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                    ffi::lua_pop(state, 1);
                    continue;
                }
                push_reply(state, v, resp);
                ffi::lua_rawset(state, -3);
            }
            wrap_top(c"map");
        }
        Reply::Double(d) => {
            if resp3 {
                ffi::lua_pushnumber(state, *d);
                wrap_top(c"double");
            } else {
                push_bytes(crate::types::num::format_g17(*d).as_bytes());
            }
        }
        Reply::HumanDouble(d) => {
            let text = crate::types::long_double::Ld::from_f64(*d).to_human();
            if resp3 {
                // Redis reads the `,` reply's text back with strtod.
                ffi::lua_pushnumber(state, text.parse().unwrap_or(*d));
                wrap_top(c"double");
            } else {
                push_bytes(text.as_bytes());
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                ffi::lua_pushboolean(state, i32::from(*b))
            } else {
                ffi::lua_pushnumber(state, if *b { 1.0 } else { 0.0 })
            }
        }
        Reply::Verbatim(format, body) => {
            if !resp3 {
                return push_bytes(body);
            }
            ffi::lua_createtable(state, 0, 2);
            ffi::lua_pushstring(state, c"string".as_ptr());
            push_bytes(body);
            ffi::lua_rawset(state, -3);
            ffi::lua_pushstring(state, c"format".as_ptr());
            push_bytes(format);
            ffi::lua_rawset(state, -3);
            wrap_top(c"verbatim_string");
        }
        Reply::BigNumber(text) => {
            push_bytes(text.as_bytes());
            if resp3 {
                wrap_top(c"big_number");
            }
        }
        // Several frames: an attribute (`|`, DEBUG PROTOCOL ATTRIB) is
        // skipped as Redis's parser skips it, the reply after it read;
        // others (subscription confirmations) come only from commands
        // scripts may not call, and Redis would read the first.
        Reply::Frames(items) => match items
            .iter()
            .find(|f| !matches!(f, Reply::Raw(bytes) if bytes.first() == Some(&b'|')))
        {
            Some(first) => push_reply(state, first, resp),
            None => ffi::lua_pushnil(state),
        },
        // Pre-encoded replies come only from EXEC and Pub/Sub deliveries,
        // which scripts cannot reach.
        Reply::Raw(_) => ffi::lua_pushnil(state),
    }
}

unsafe fn push_sequence(state: *mut mlua::lua_State, items: &[Reply], resp: u8) {
    mlua::ffi::lua_createtable(state, items.len() as i32, 0);
    for (i, item) in items.iter().enumerate() {
        push_reply(state, item, resp);
        mlua::ffi::lua_rawseti(state, -2, (i + 1) as _);
    }
}

/// A script's result as the reply to EVAL. `script_resp` is the protocol
/// the script chose (`redis.setresp`): it decides how booleans convert.
///
/// Done on the Lua stack itself, exactly as Redis's
/// `luaReplyToRedisReply`, stack checks included: a table nested deeper
/// than the Lua stack allows ends in `-ERR reached lua stack limit` at the
/// very same depth (a self-referencing table is the classic case).
pub fn lua_to_reply(lua: &Lua, value: Value, script_resp: u8) -> Reply {
    // Scalars convert without the stack (most scripts return one).
    match &value {
        Value::String(s) => return Reply::Bulk(s.as_bytes().to_vec()),
        Value::Integer(i) => return Reply::Int(*i),
        Value::Number(n) => return Reply::Int(c_cast_i64(*n)),
        Value::Boolean(b) if script_resp >= 3 => return Reply::Bool(*b),
        Value::Boolean(true) => return Reply::Int(1),
        Value::Boolean(false) | Value::Nil => return Reply::Null,
        _ => {}
    }
    let mut reply = Reply::Null;
    // The conversion never allocates Lua memory but for growing the
    // stack; lift the limit meanwhile so no allocation failure can unwind
    // through it.
    let limit = lua.set_memory_limit(0).unwrap_or(0);
    let slot = &mut reply;
    // SAFETY: the closure runs on a protected call with the result (and a
    // nil first, like Redis's error handler below it) on the stack, and
    // only reads it with stack-checked Lua API calls.
    let result = unsafe {
        lua.exec_raw::<()>((Value::Nil, value), |state| {
            *slot = convert_top(state, script_resp);
            mlua::ffi::lua_settop(state, 0);
        })
    };
    let _ = lua.set_memory_limit(limit);
    match result {
        Ok(()) => reply,
        Err(e) => Reply::error(error_text(format!("ERR {e}").as_bytes())),
    }
}

/// Bytes of the string at `index` (a string or number).
unsafe fn bytes_at(state: *mut mlua::lua_State, index: i32) -> Vec<u8> {
    let mut len = 0usize;
    let ptr = mlua::ffi::lua_tolstring(state, index, &mut len);
    if ptr.is_null() {
        return Vec::new();
    }
    std::slice::from_raw_parts(ptr as *const u8, len).to_vec()
}

/// Pushes `t[field]` (raw) for the table on top; returns its Lua type.
unsafe fn raw_field(state: *mut mlua::lua_State, field: &std::ffi::CStr) -> i32 {
    mlua::ffi::lua_pushstring(state, field.as_ptr());
    mlua::ffi::lua_rawget(state, -2);
    mlua::ffi::lua_type(state, -1)
}

/// Converts and pops the value on top of the stack (Redis's
/// `luaReplyToRedisReply`, branch for branch).
unsafe fn convert_top(state: *mut mlua::lua_State, script_resp: u8) -> Reply {
    use mlua::ffi;
    if ffi::lua_checkstack(state, 4) == 0 {
        ffi::lua_pop(state, 1);
        return Reply::err("ERR reached lua stack limit");
    }
    let reply = match ffi::lua_type(state, -1) {
        ffi::LUA_TSTRING => Reply::Bulk(bytes_at(state, -1)),
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(state, -1) != 0;
            if script_resp >= 3 {
                Reply::Bool(b)
            } else if b {
                Reply::Int(1)
            } else {
                Reply::Null
            }
        }
        ffi::LUA_TNUMBER => Reply::Int(c_cast_i64(ffi::lua_tonumber(state, -1))),
        ffi::LUA_TTABLE => return convert_table(state, script_resp),
        _ => Reply::Null,
    };
    ffi::lua_pop(state, 1);
    reply
}

/// The table branch of [`convert_top`]: pops the table.
unsafe fn convert_table(state: *mut mlua::lua_State, script_resp: u8) -> Reply {
    use mlua::ffi;
    if raw_field(state, c"err") == ffi::LUA_TSTRING {
        let text = bytes_at(state, -1);
        ffi::lua_pop(state, 2);
        return Reply::error(line_text(&text));
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"ok") == ffi::LUA_TSTRING {
        let text = bytes_at(state, -1);
        ffi::lua_pop(state, 2);
        return Reply::Simple(line_text(&text).into());
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"double") == ffi::LUA_TNUMBER {
        let d = ffi::lua_tonumber(state, -1);
        ffi::lua_pop(state, 2);
        return Reply::Double(d);
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"big_number") == ffi::LUA_TSTRING {
        let text = error_text(&bytes_at(state, -1));
        ffi::lua_pop(state, 2);
        return Reply::BigNumber(text);
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"verbatim_string") == ffi::LUA_TTABLE {
        if raw_field(state, c"format") == ffi::LUA_TSTRING {
            let format = bytes_at(state, -1);
            ffi::lua_pushstring(state, c"string".as_ptr());
            ffi::lua_rawget(state, -3);
            if ffi::lua_type(state, -1) == ffi::LUA_TSTRING {
                let body = bytes_at(state, -1);
                ffi::lua_pop(state, 4);
                let mut f = [0u8; 3];
                for (dst, src) in f.iter_mut().zip(format.iter()) {
                    *dst = *src;
                }
                return Reply::Verbatim(f, body);
            }
            ffi::lua_pop(state, 1);
        }
        ffi::lua_pop(state, 1);
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"map") == ffi::LUA_TTABLE {
        let mut pairs = Vec::new();
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            ffi::lua_pushvalue(state, -2);
            let key = convert_top(state, script_resp);
            let value = convert_top(state, script_resp);
            pairs.push((key, value));
        }
        ffi::lua_pop(state, 2);
        return Reply::Map(pairs);
    }
    ffi::lua_pop(state, 1);
    if raw_field(state, c"set") == ffi::LUA_TTABLE {
        let mut items = Vec::new();
        ffi::lua_pushnil(state);
        while ffi::lua_next(state, -2) != 0 {
            ffi::lua_pop(state, 1);
            ffi::lua_pushvalue(state, -1);
            items.push(convert_top(state, script_resp));
        }
        ffi::lua_pop(state, 2);
        return Reply::Set(items);
    }
    ffi::lua_pop(state, 1);
    let mut items = Vec::new();
    let mut j = 1.0;
    loop {
        ffi::lua_pushnumber(state, j);
        j += 1.0;
        ffi::lua_rawget(state, -2);
        if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
            ffi::lua_pop(state, 1);
            break;
        }
        items.push(convert_top(state, script_resp));
    }
    ffi::lua_pop(state, 1);
    Reply::Array(items)
}

/// `(long long)` of a double as x86-64 computes it: truncation, and
/// LLONG_MIN for NaN and anything out of range.
fn c_cast_i64(n: f64) -> i64 {
    if n.is_finite() && n > -9.223_372_036_854_776e18 && n < 9.223_372_036_854_776e18 {
        n as i64
    } else {
        i64::MIN
    }
}

/// Status and error text as Redis copies it: up to a NUL byte, CR/LF as
/// spaces.
fn line_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    error_text(&bytes[..end])
}

/// The reply to a script that raised `error` (Redis's error path of
/// `luaCallFunction`): the error's text, then where it happened.
/// `stop` replaces the text of a script stopped by SCRIPT KILL or
/// SHUTDOWN NOSAVE.
pub fn script_error(error: &Value, sha: &str, stop: Option<&str>) -> Reply {
    let Value::Table(t) = error else {
        let text = match error {
            Value::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_string(),
        };
        let text: String = text.chars().take(100).collect();
        return Reply::error(error_text(
            format!("ERR Error running script {sha}, {text}\n").as_bytes(),
        ));
    };
    let as_text = |v: Value| match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(crate::types::num::format_g(n, 14).into_bytes()),
        _ => None,
    };
    let mut text = match stop {
        Some(s) => s.as_bytes().to_vec(),
        None => as_text(t.get::<Value>("err").unwrap_or(Value::Nil))
            .unwrap_or_else(|| b"ERR unknown error".to_vec()),
    };
    let source = as_text(t.get::<Value>("source").unwrap_or(Value::Nil));
    let line = as_text(t.get::<Value>("line").unwrap_or(Value::Nil));
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(b" script: ");
        text.extend_from_slice(sha.as_bytes());
        text.extend_from_slice(b", on ");
        text.extend_from_slice(&source);
        text.push(b':');
        text.extend_from_slice(&line);
        text.push(b'.');
    }
    Reply::error(error_text(&text))
}
