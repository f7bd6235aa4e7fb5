//! The Lua C functions of the script environment: `redis.call` and
//! `redis.pcall` straight off the Lua stack, the status trampoline behind
//! the prelude's `wrap`, and Lua 5.1's `pcall`/`xpcall` with a stack check.

use std::sync::atomic::Ordering;

use super::{call, convert, ActiveRun, Running};
use crate::reply::Reply;

/// Arguments of a `redis.call` held without an allocation.
const INLINE_ARGS: usize = 8;

/// `redis.call` (Redis's `luaRedisCallCommand`).
///
/// # Safety
/// Called by Lua only, with the ActiveRun pointer as upvalue 1 and
/// [`push_outcome`] as upvalue 2.
pub(super) unsafe extern "C-unwind" fn redis_call_c(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    command_c(state, true)
}

/// `redis.pcall` (Redis's `luaRedisPCallCommand`).
///
/// # Safety
/// As [`redis_call_c`].
pub(super) unsafe extern "C-unwind" fn redis_pcall_c(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    command_c(state, false)
}

/// What [`command_c`] pushes: the reply, or an error table.
struct Outcome<'a> {
    reply: Result<Reply, (std::borrow::Cow<'a, str>, bool)>,
    resp: u8,
}

/// Runs one command from a script straight off the Lua stack (no mlua
/// callback: arguments are read where they lie, the reply is built on the
/// stack), the hot path of every script.
///
/// Lua errors unwind by longjmp, which must not skip Rust values that own
/// memory: the command runs with nothing pushed, the reply is pushed by a
/// protected call ([`push_outcome`]), and only after every Rust value is
/// dropped is an error raised.
///
/// # Safety
/// Called by Lua only, with the ActiveRun pointer as upvalue 1 and
/// [`push_outcome`] as upvalue 2.
unsafe fn command_c(state: *mut mlua::lua_State, raise: bool) -> std::ffi::c_int {
    use mlua::ffi;
    let active = ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const ActiveRun;
    // Outside a run both raise (Redis: "can only be called inside a
    // script invocation").
    let not_running = (*active).0.load(Ordering::Acquire).is_null();
    let (pushed, failed) = {
        let outcome = command_outcome(state, active);
        let failed = outcome.reply.as_ref().map_or(true, Reply::is_error);
        ffi::lua_settop(state, 0);
        // The pusher is upvalue 2: no new closure per call.
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_pushlightuserdata(state, (&outcome as *const Outcome).cast_mut().cast());
        (ffi::lua_pcall(state, 1, 1, 0), failed)
        // `outcome` (the reply, the argument copies) is dropped here.
    };
    if pushed != 0 || (failed && (raise || not_running)) {
        ffi::lua_error(state);
    }
    1
}

/// Reads the command and runs it (no Lua error can happen here).
unsafe fn command_outcome(
    state: *mut mlua::lua_State,
    active: *const ActiveRun,
) -> Outcome<'static> {
    use mlua::ffi;
    let ptr = (*active).0.load(Ordering::Acquire);
    if ptr.is_null() {
        return Outcome {
            reply: Err((
                "ERR redis.call/pcall can only be called inside a script invocation".into(),
                false,
            )),
            resp: 2,
        };
    }
    // SAFETY: as in the bridge: set by Scripting::run for exactly this
    // call into Lua, never touched elsewhere meanwhile.
    let running = &mut *ptr.cast::<Running<'static, 'static>>();
    let argc = ffi::lua_gettop(state).max(0) as usize;
    // Numbers are formatted first (the only owned arguments); strings are
    // read where they lie on the Lua stack.
    let mut numbers: Vec<Vec<u8>> = Vec::new();
    for i in 1..=argc as i32 {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {}
            ffi::LUA_TNUMBER => numbers
                .push(crate::types::num::format_g17(ffi::lua_tonumber(state, i)).into_bytes()),
            _ => {
                return Outcome {
                    reply: Err((
                        "ERR Lua redis lib command arguments must be strings or integers".into(),
                        false,
                    )),
                    resp: running.session.resp,
                }
            }
        }
    }
    if argc == 0 {
        return Outcome {
            reply: Err((
                "ERR Please specify at least one argument for this redis lib call".into(),
                false,
            )),
            resp: running.session.resp,
        };
    }
    let mut next_number = numbers.iter();
    let mut arg = |i: usize| -> &[u8] {
        if ffi::lua_type(state, i as i32) == ffi::LUA_TSTRING {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(state, i as i32, &mut len);
            // SAFETY: the string is on the Lua stack until command_c
            // clears it, after the command ran.
            std::slice::from_raw_parts(p.cast(), len)
        } else {
            next_number.next().map_or(&[][..], Vec::as_slice)
        }
    };
    // Most commands fit in a few arguments: no allocation for those.
    let mut inline: [&[u8]; INLINE_ARGS] = [&[]; INLINE_ARGS];
    let spilled: Vec<&[u8]>;
    let argv: &[&[u8]] = if argc <= INLINE_ARGS {
        for (i, slot) in inline[..argc].iter_mut().enumerate() {
            *slot = arg(i + 1);
        }
        &inline[..argc]
    } else {
        spilled = (1..=argc).map(arg).collect();
        &spilled
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        call(running.ctx, running.session, running.state, argv)
    }));
    if let Ok(Err(text)) = &result {
        crate::command::observe::script_refusal(running.ctx, argv, text);
    }
    let reply = match result {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(text)) => Err((text.into(), true)),
        Err(_) => Err(("ERR internal error running the command".into(), true)),
    };
    Outcome {
        reply,
        resp: running.session.resp,
    }
}

/// Pushes an [`Outcome`] (a protected call: allocation failures unwind to
/// [`command_c`]'s lua_pcall, not through Rust frames).
///
/// # Safety
/// Called through lua_pcall by [`command_c`] with the Outcome as light
/// userdata.
pub(super) unsafe extern "C-unwind" fn push_outcome(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    let outcome = &*(mlua::ffi::lua_touserdata(state, 1) as *const Outcome);
    mlua::ffi::lua_settop(state, 0);
    match &outcome.reply {
        Ok(reply) => convert::push_reply(state, reply, outcome.resp),
        Err((text, from_command)) => convert::push_error_table(state, text, *from_command),
    }
    1
}

/// The C closure behind the prelude's `wrap`: calls the Lua function in
/// its upvalue and acts on the status it returns first: `true` returns the
/// values after it, `false` raises the value after it as it is, `'where'`
/// raises it prefixed with the caller's position (luaL_error's). Being a C
/// function, as Redis's are, a tail call to it keeps the caller's frame
/// and its errors point at the caller's line.
///
/// # Safety
/// Called by Lua only, with the implementation as upvalue 1. Nothing
/// owned lives in this frame when `lua_error` unwinds it.
pub(super) unsafe extern "C-unwind" fn status_trampoline(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    use mlua::ffi;
    let nargs = ffi::lua_gettop(state);
    // A C function gets LUA_MINSTACK free slots: room for the function.
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, nargs, ffi::LUA_MULTRET);
    let results = ffi::lua_gettop(state);
    if results == 0
        || (ffi::lua_type(state, 1) == ffi::LUA_TBOOLEAN && ffi::lua_toboolean(state, 1) != 0)
    {
        return (results - 1).max(0);
    }
    ffi::lua_settop(state, 2);
    if ffi::lua_type(state, 1) == ffi::LUA_TSTRING {
        ffi::luaL_where(state, 1);
        ffi::lua_insert(state, 2);
        ffi::lua_concat(state, 2);
    }
    ffi::lua_error(state)
}

/// Lua 5.1's `pcall` (luaB_pcall) with room checked for the status it
/// pushes after the call's results.
///
/// # Safety
/// Called by Lua only; nothing owned lives in this frame.
pub(super) unsafe extern "C-unwind" fn checked_pcall(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checkany(state, 1);
    let status = ffi::lua_pcall(state, ffi::lua_gettop(state) - 1, ffi::LUA_MULTRET, 0);
    ffi::luaL_checkstack(state, 1, std::ptr::null());
    ffi::lua_pushboolean(state, std::ffi::c_int::from(status == 0));
    ffi::lua_insert(state, 1);
    ffi::lua_gettop(state)
}

/// Lua 5.1's `xpcall` (luaB_xpcall) with room checked for its status.
///
/// # Safety
/// Called by Lua only; nothing owned lives in this frame.
pub(super) unsafe extern "C-unwind" fn checked_xpcall(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    use mlua::ffi;
    ffi::luaL_checkany(state, 2);
    ffi::lua_settop(state, 2);
    ffi::lua_insert(state, 1);
    let status = ffi::lua_pcall(state, 0, ffi::LUA_MULTRET, 1);
    ffi::luaL_checkstack(state, 1, std::ptr::null());
    ffi::lua_pushboolean(state, std::ffi::c_int::from(status == 0));
    ffi::lua_replace(state, 1);
    ffi::lua_gettop(state)
}

/// The key and argument arrays of one call, handed to [`fcall_entry`]
/// and [`set_arrays_entry`] as light userdata.
pub(super) struct Arrays<'a> {
    pub keys: &'a [&'a [u8]],
    pub args: &'a [&'a [u8]],
}

/// Pushes a new array of `items` (strings).
unsafe fn push_array(state: *mut mlua::lua_State, items: &[&[u8]]) {
    use mlua::ffi;
    ffi::lua_createtable(state, items.len() as i32, 0);
    for (i, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
        ffi::lua_rawseti(state, -2, (i + 1) as _);
    }
}

/// FCALL's way into Lua: called with the prelude's `run_function`, the
/// callback, the bridge and a pointer to the [`Arrays`]; builds the key
/// and argument tables (new ones each call, as in Redis) and calls
/// `run_function` with the four, returning its two results.
///
/// # Safety
/// Called by Lua only, through a protected call, with a valid [`Arrays`]
/// pointer at index 4. Nothing owned lives in this frame when a memory
/// error unwinds it.
pub(super) unsafe extern "C-unwind" fn fcall_entry(state: *mut mlua::lua_State) -> std::ffi::c_int {
    let arrays = &*(mlua::ffi::lua_touserdata(state, 4) as *const Arrays);
    mlua::ffi::lua_settop(state, 3);
    push_array(state, arrays.keys);
    push_array(state, arrays.args);
    mlua::ffi::lua_call(state, 4, 2);
    2
}

/// EVAL's `KEYS` and `ARGV`: called with the scripts' globals table and a
/// pointer to the [`Arrays`]; sets the two globals to new tables.
///
/// # Safety
/// As [`fcall_entry`], with the globals at index 1 and the pointer at 2.
pub(super) unsafe extern "C-unwind" fn set_arrays_entry(
    state: *mut mlua::lua_State,
) -> std::ffi::c_int {
    use mlua::ffi;
    let arrays = &*(ffi::lua_touserdata(state, 2) as *const Arrays);
    ffi::lua_settop(state, 1);
    for (name, items) in [(c"KEYS", arrays.keys), (c"ARGV", arrays.args)] {
        ffi::lua_pushstring(state, name.as_ptr());
        push_array(state, items);
        ffi::lua_rawset(state, 1);
    }
    0
}
