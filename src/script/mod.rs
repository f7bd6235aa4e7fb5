//! Lua scripting (EVAL, EVALSHA, SCRIPT): a Lua 5.1 interpreter (mlua,
//! vendored, the version Redis embeds) with Redis 7.0's sandbox, `redis.*`
//! API, libraries and type conversions.
//!
//! # How a script runs
//!
//! One Lua state lives in the engine ([`Scripting`], in `Core`), created on
//! first use and replaced by SCRIPT FLUSH. A script body is compiled once
//! into a function named by its SHA1 and kept in the cache. EVAL takes the
//! state out of `Core` for the run, sets `KEYS` and `ARGV`, and calls the
//! function through `prelude.lua`'s runner with a *bridge*: a Rust
//! function valid for this run only, through which `redis.call` executes
//! commands on the engine with their own client (database and protocol of
//! the script, blocking refused). Everything the commands log goes to the
//! engine's effects, so the whole script reaches the AOF as one MULTI/EXEC
//! unit of the commands it ran, never as the script: replay needs neither
//! the cache nor deterministic Lua.
//!
//! # Busy scripts
//!
//! With `busy-reply-threshold` (`lua-time-limit`) above zero a count hook
//! checks the running time every [`HOOK_INSTRUCTIONS`] instructions. Past
//! the threshold it calls [`Host::while_busy`](crate::command::Host::while_busy)
//! on each check: the server answers other clients with `-BUSY` and takes
//! SCRIPT KILL (refused once the script wrote) or SHUTDOWN NOSAVE, which
//! stop the script with an error no `pcall` can catch.

mod convert;
mod lua_c;

use lua_c::{
    checked_pcall, checked_xpcall, fcall_entry, push_outcome, redis_call_c, redis_pcall_c,
    set_arrays_entry, status_trampoline, Arrays,
};
pub mod functions;
pub mod libs;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use crate::command::ctx::{BusyAction, BusyScript};
use crate::command::{self, flags, Ctx, Effect, Session};
use crate::reply::Reply;

/// Instructions between two checks of a running script's time (Redis's
/// count hook uses the same period).
pub const HOOK_INSTRUCTIONS: u32 = 100_000;

/// Most memory the Lua state may allocate; beyond it allocations fail and
/// the script stops with "not enough memory" instead of growing the
/// server without bound.
pub const LUA_MEMORY_LIMIT_BYTES: usize = 1 << 30;

/// The Lua collector's pause, in percent of the live heap (see
/// `Scripting::new`).
const LUA_GC_PAUSE: std::ffi::c_int = 400;

/// The session id of the scripts' own client (never a real connection's).
pub const SCRIPT_CLIENT_ID: u64 = u64::MAX;

const PRELUDE: &str = include_str!("prelude.lua");
const USER_CHUNK: &str = "@user_script";
const BRIDGE_KEY: &str = "hozon_bridge";

/// `NOSCRIPT No matching script. Please use EVAL.`
pub const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// SCRIPT KILL's refusal once the script has written (the server's).
#[cfg(feature = "server")]
pub const UNKILLABLE_ERR: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// SCRIPT KILL with no script running.
pub const NOTBUSY_ERR: &str = "NOTBUSY No scripts in execution right now.";

/// Flags a script declares in its `#!lua flags=...` shebang line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// No shebang: Redis's backward-compatible mode (flags come from the
    /// commands the script runs).
    pub compat: bool,
    /// `no-writes`: the script may only read.
    pub no_writes: bool,
    /// `allow-oom`.
    pub allow_oom: bool,
    /// `allow-stale`.
    pub allow_stale: bool,
    /// `no-cluster`.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`.
    pub allow_cross_slot: bool,
}

/// Whether a script's flags include one flag.
pub type FlagTest = fn(&ScriptFlags) -> bool;

/// The script flags by name, in Redis's order (`scripts_flags_def`), with
/// a test for each (FUNCTION LIST's `flags`).
pub const SCRIPT_FLAG_NAMES: &[(&str, FlagTest)] = &[
    ("no-writes", |f| f.no_writes),
    ("allow-oom", |f| f.allow_oom),
    ("allow-stale", |f| f.allow_stale),
    ("no-cluster", |f| f.no_cluster),
    ("allow-cross-slot-keys", |f| f.allow_cross_slot),
];

/// Parses the shebang of `body` (Redis's `evalExtractShebangFlags`):
/// the flags and the length of the shebang line to skip when compiling
/// (its newline is kept so line numbers stay right).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((
            ScriptFlags {
                compat: true,
                ..ScriptFlags::default()
            },
            0,
        ));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = &body[..end];
    let Some(parts) = crate::resp::split_args(line) else {
        return Err("Invalid engine in script shebang".into());
    };
    let Some(engine) = parts.first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine.as_slice() != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        // `flags=` alone declares no flag (Redis's sdssplitlen of an empty
        // string gives no parts).
        for flag in list.split(|&b| b == b',').filter(|_| !list.is_empty()) {
            match flag {
                b"no-writes" => flags.no_writes = true,
                b"allow-oom" => flags.allow_oom = true,
                b"allow-stale" => flags.allow_stale = true,
                b"no-cluster" => flags.no_cluster = true,
                b"allow-cross-slot-keys" => flags.allow_cross_slot = true,
                other => {
                    return Err(format!(
                        "Unexpected flag in script shebang: {}",
                        String::from_utf8_lossy(other)
                    ))
                }
            }
        }
    }
    Ok((flags, end))
}

/// The lowercase hex SHA1 of `bytes` (script names, `redis.sha1hex`).
pub fn sha1_hex(bytes: &[u8]) -> String {
    sha_text(&script_sha(bytes)).to_string()
}

/// A script's name: the lowercase hex SHA1 of its body.
pub type Sha = [u8; 40];

/// The name of a script body.
pub fn script_sha(body: &[u8]) -> Sha {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = sha1_smol::Sha1::from(body).digest().bytes();
    let mut out = [0u8; 40];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
    out
}

/// `sha` (as EVALSHA or SCRIPT EXISTS give it) as a script name: 40 bytes,
/// any letter case.
pub fn parse_sha(sha: &[u8]) -> Option<Sha> {
    let mut out: Sha = sha.try_into().ok()?;
    out.make_ascii_lowercase();
    Some(out)
}

/// A script name as text (for error messages).
pub fn sha_text(sha: &Sha) -> &str {
    std::str::from_utf8(sha).unwrap_or("")
}

/// One cached script.
struct Script {
    flags: ScriptFlags,
    function: Function,
}

/// Redis's `lrand48` (the 48-bit linear congruential generator behind
/// `math.random` in scripts), state shared by every script of the
/// process, as in Redis 7.0.
#[derive(Debug)]
struct Lrand48(AtomicU64);

impl Lrand48 {
    const A: u64 = 0x5_DEEC_E66D;
    const C: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;
    const INITIAL: u64 = 0x1234_ABCD_330E;

    fn next(&self) -> i32 {
        let x = (self.0.load(Ordering::Relaxed).wrapping_mul(Self::A) + Self::C) & Self::MASK;
        self.0.store(x, Ordering::Relaxed);
        (x >> 17) as i32
    }

    fn seed(&self, seed: i32) {
        self.0
            .store((u64::from(seed as u32) << 16) | 0x330E, Ordering::Relaxed);
    }
}

/// What the count hook and the helpers share with the running script.
#[derive(Debug)]
struct Watch {
    /// The clock's origin (the statistics clock: the TSC where it is
    /// invariant, a cheaper read than `Instant`).
    base: crate::core::stats_clock::Stamp,
    started_ns: AtomicU64,
    threshold_ms: AtomicU64,
    killed: AtomicBool,
    timed_out: AtomicBool,
    /// While a library loads: the most milliseconds it may run (0: no
    /// limit, as for libraries from the AOF, a file or a master).
    load_limit_ms: AtomicU64,
    /// The load limit stopped a library's code.
    load_timed_out: AtomicBool,
}

impl Watch {
    fn elapsed(&self) -> Duration {
        let now = crate::core::stats_clock::nanos_since(self.base);
        Duration::from_nanos(now.saturating_sub(self.started_ns.load(Ordering::Relaxed)))
    }
}

/// Why a running script was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Shutdown,
}

/// A running script's state, seen by the bridge.
struct RunState {
    function: bool,
    read_only: bool,
    /// Declared `allow-oom` (never for a script without a shebang).
    allow_oom: bool,
    wrote: bool,
    log_effects: bool,
    stop: Option<Stop>,
}

/// What the bridge reaches while a script runs.
struct Running<'r, 'c> {
    ctx: &'r mut Ctx<'c>,
    session: &'r mut Session,
    state: &'r mut RunState,
}

/// Where the bridge (a Lua function created once per state, called for
/// every redis.call) finds the run in progress: a pointer to the
/// [`Running`] on [`Scripting::run`]'s stack, null between runs. A
/// per-run scoped function would cost several protected Lua calls and
/// allocations per EVAL.
#[derive(Debug, Default)]
struct ActiveRun(AtomicPtr<()>);

/// Publishes a [`Running`] for the duration of one script call.
struct ActiveGuard<'a>(&'a ActiveRun);

impl<'a> ActiveGuard<'a> {
    fn set(active: &'a ActiveRun, running: &mut Running<'_, '_>) -> ActiveGuard<'a> {
        active
            .0
            .store((running as *mut Running<'_, '_>).cast(), Ordering::Release);
        ActiveGuard(active)
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0 .0.store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// What [`Scripting::run_prepared`] runs.
enum Callable<'a> {
    /// An EVAL script (KEYS and ARGV already set).
    Script(Function),
    /// A library function with its keys and arguments.
    Function(&'a Function, &'a [&'a [u8]], &'a [&'a [u8]]),
}

/// The function FCALL runs: its callback, flags and name (for errors).
#[derive(Debug, Clone, Copy)]
pub struct Callee<'a> {
    /// The registered callback.
    pub callback: &'a Function,
    /// Its declared flags.
    pub flags: ScriptFlags,
    /// Its name.
    pub name: &'a str,
}

/// A function a library registered while it loaded.
#[derive(Debug, Clone)]
pub struct Registered {
    /// Its name as registered.
    pub name: Vec<u8>,
    /// Its description, when given.
    pub description: Option<Vec<u8>>,
    /// Its flags (never `compat`).
    pub flags: ScriptFlags,
    /// The callback.
    pub callback: Function,
}

/// The registrations a library load returned (`{name, desc, callback,
/// flags}` tables, the flags a bit mask in Redis's flag order).
fn registrations(list: &Table) -> Result<Vec<Registered>, String> {
    let mut out = Vec::new();
    for entry in list.sequence_values::<Table>() {
        let entry = entry.map_err(|e| e.to_string())?;
        let text = |field: &str| -> Option<Vec<u8>> {
            match entry.get::<Value>(field) {
                Ok(Value::String(s)) => Some(s.as_bytes().to_vec()),
                _ => None,
            }
        };
        let mask: i64 = entry.get("flags").unwrap_or(0);
        out.push(Registered {
            name: text("name").unwrap_or_default(),
            description: text("desc"),
            flags: ScriptFlags {
                compat: false,
                no_writes: mask & 1 != 0,
                allow_oom: mask & 2 != 0,
                allow_stale: mask & 4 != 0,
                no_cluster: mask & 8 != 0,
                allow_cross_slot: mask & 16 != 0,
            },
            callback: entry.get("callback").map_err(|e| e.to_string())?,
        });
    }
    Ok(out)
}

/// The Lua state, the script cache and the scripts' client.
pub struct Scripting {
    lua: Lua,
    runner: Function,
    load_library: Function,
    run_function: Function,
    /// [`lua_c::fcall_entry`]: FCALL's way in, called with mlua's cached
    /// error handler (no closure is made per call).
    fcall_entry: Function,
    /// [`lua_c::set_arrays_entry`], likewise for EVAL.
    set_arrays_entry: Function,
    bridge: Function,
    active: Arc<ActiveRun>,
    globals: Table,
    scripts: HashMap<Sha, Script, foldhash::fast::FixedState>,
    scripts_bytes: usize,
    session: Session,
    rng: Arc<Lrand48>,
    watch: Arc<Watch>,
}

impl std::fmt::Debug for Scripting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripting")
            .field("scripts", &self.scripts.len())
            .finish()
    }
}

impl Scripting {
    /// A fresh Lua state with the Redis environment and an empty cache.
    /// Every state of the process shares one `lrand48` (Redis's is a C
    /// global: EVAL's and the function engine's math.random continue one
    /// sequence, never reseeded).
    pub fn new() -> Result<Scripting, String> {
        static RNG: std::sync::OnceLock<Arc<Lrand48>> = std::sync::OnceLock::new();
        let rng = RNG
            .get_or_init(|| Arc::new(Lrand48(AtomicU64::new(Lrand48::INITIAL))))
            .clone();
        let watch = Arc::new(Watch {
            base: crate::core::stats_clock::now(),
            started_ns: AtomicU64::new(0),
            threshold_ms: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            load_limit_ms: AtomicU64::new(0),
            load_timed_out: AtomicBool::new(false),
        });
        Self::with_shared(rng, watch).map_err(|e| format!("cannot start Lua: {e}"))
    }

    fn with_shared(rng: Arc<Lrand48>, watch: Arc<Watch>) -> mlua::Result<Scripting> {
        // SAFETY: the debug library is needed by the prelude's error
        // handler (debug.getinfo); the prelude keeps a private reference
        // and removes `debug` from the globals before any script runs.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        lua.set_memory_limit(LUA_MEMORY_LIMIT_BYTES)?;
        // A cycle starts once the heap reaches LUA_GC_PAUSE % of what the
        // last one left (Lua's default: 200). The collector's work per
        // byte allocated falls as 1/(pause − 100): every script call
        // leaves a little garbage (its KEYS/ARGV tables and strings), and
        // the heap between cycles stays small (docs/scripting.md).
        lua.gc_set_mode(mlua::state::GcMode::Incremental(
            mlua::state::GcIncParams::default().pause(LUA_GC_PAUSE),
        ));
        libs::register(&lua)?;
        install_hook(&lua, watch.clone())?;
        let helpers = lua.create_table()?;
        let r = rng.clone();
        helpers.set(
            "random",
            lua.create_function(move |_, ()| {
                let max = f64::from(i32::MAX);
                Ok(f64::from(r.next() % i32::MAX) / max)
            })?,
        )?;
        let r = rng.clone();
        helpers.set(
            "srandom",
            lua.create_function(move |_, seed: f64| {
                r.seed(seed as i32);
                Ok(())
            })?,
        )?;
        helpers.set(
            "sha1hex",
            lua.create_function(|_, v: Value| {
                let text = match &v {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(i) => i.to_string().into_bytes(),
                    Value::Number(n) => crate::types::num::format_g(*n, 14).into_bytes(),
                    _ => Vec::new(),
                };
                Ok(sha1_hex(&text))
            })?,
        )?;
        let w = watch.clone();
        helpers.set(
            "killed",
            lua.create_function(move |_, ()| Ok(w.killed.load(Ordering::Relaxed)))?,
        )?;
        helpers.set(
            "log",
            lua.create_function(|lua, (level, text): (i64, mlua::LuaString)| {
                if let Ok(bridge) = lua.named_registry_value::<Function>(BRIDGE_KEY) {
                    bridge.call::<()>((6, level, text))?;
                }
                Ok(())
            })?,
        )?;
        helpers.set(
            "wrap",
            lua.create_function(|lua, implementation: Function| {
                // SAFETY: pushes one C closure over the implementation
                // (the argument exec_raw placed on the stack).
                unsafe {
                    lua.exec_raw::<Function>(implementation, |state| {
                        mlua::ffi::lua_pushcclosure(state, status_trampoline, 1);
                    })
                }
            })?,
        )?;
        // SAFETY: plain Lua C functions (see their comments).
        helpers.set("pcall", unsafe { lua.create_c_function(checked_pcall) }?)?;
        helpers.set("xpcall", unsafe { lua.create_c_function(checked_xpcall) }?)?;
        helpers.set("version", crate::command::server::REDIS_VERSION)?;
        helpers.set("version_num", redis_version_num())?;
        let active = Arc::new(ActiveRun::default());
        for (name, raise) in [("redis_call", true), ("redis_pcall", false)] {
            let run = Arc::as_ptr(&active).cast_mut().cast::<std::ffi::c_void>();
            let f = if raise { redis_call_c } else { redis_pcall_c };
            // SAFETY: pushes a C closure over a light userdata, the
            // ActiveRun, which the Scripting owning this Lua state keeps
            // alive (the Arc) for as long as the state exists, and the
            // reply pusher.
            let function = unsafe {
                lua.exec_raw::<Function>((), |state| {
                    mlua::ffi::lua_pushlightuserdata(state, run);
                    mlua::ffi::lua_pushcfunction(state, push_outcome);
                    mlua::ffi::lua_pushcclosure(state, f, 2);
                })
            }?;
            helpers.set(name, function)?;
        }
        let (runner, globals, load_library, run_function): (Function, Table, Function, Function) =
            lua.load(PRELUDE).set_name("=hozon").call(helpers)?;
        let (a, w) = (active.clone(), watch.clone());
        let bridge_fn = lua.create_function(move |lua, args: MultiValue| {
            let ptr = a.0.load(Ordering::Acquire);
            if ptr.is_null() {
                let e = convert::error_table(
                    lua,
                    "ERR redis.call/pcall can only be called inside a script invocation",
                    false,
                )?;
                return (false, e).into_lua_multi(lua);
            }
            // SAFETY: `ptr` is set by Scripting::run for exactly the duration
            // of its call into Lua (ActiveGuard), pointing at a Running on
            // its stack that nothing else touches meanwhile; Lua calls the
            // bridge on that thread only, never reentrantly (no Lua code runs
            // inside it).
            let running = unsafe { &mut *ptr.cast::<Running<'static, 'static>>() };
            bridge(lua, running.ctx, running.session, running.state, &w, args)
        })?;
        lua.set_named_registry_value(BRIDGE_KEY, bridge_fn.clone())?;
        // The setup's garbage (the prelude's chunks, temporary strings)
        // goes now: a new state reports what it holds (INFO
        // `used_memory_lua` after SCRIPT FLUSH).
        // SAFETY: a plain Lua C function (see its comment).
        let fcall_entry = unsafe { lua.create_c_function(fcall_entry) }?;
        // SAFETY: likewise.
        let set_arrays_entry = unsafe { lua.create_c_function(set_arrays_entry) }?;
        lua.gc_collect()?;
        Ok(Scripting {
            lua,
            runner,
            load_library,
            run_function,
            fcall_entry,
            set_arrays_entry,
            bridge: bridge_fn,
            active,
            globals,
            scripts: HashMap::default(),
            scripts_bytes: 0,
            session: Session::new(SCRIPT_CLIENT_ID, true, 0),
            rng,
            watch,
        })
    }

    /// Empties the cache and starts a new Lua state (SCRIPT FLUSH). The
    /// `math.random` sequence goes on, as in Redis.
    pub fn flush(&mut self) -> Result<(), String> {
        *self = Self::with_shared(self.rng.clone(), self.watch.clone())
            .map_err(|e| format!("cannot start Lua: {e}"))?;
        Ok(())
    }

    /// True when a script with this SHA1 is cached (in any letter case,
    /// as Redis's case-insensitive script dictionary finds it).
    pub fn exists(&self, sha: &[u8]) -> bool {
        parse_sha(sha).is_some_and(|s| self.scripts.contains_key(&s))
    }

    /// Number of cached scripts.
    pub fn cached(&self) -> usize {
        self.scripts.len()
    }

    /// Bytes of the cached script bodies (INFO `used_memory_scripts_eval`).
    pub fn scripts_bytes(&self) -> usize {
        self.scripts_bytes
    }

    /// Bytes the Lua state has allocated (INFO `used_memory_lua`).
    pub fn lua_bytes(&self) -> usize {
        self.lua.used_memory()
    }

    /// Compiles and caches `body` (SCRIPT LOAD, or EVAL of a new script);
    /// returns its SHA1. The error is the reply Redis gives.
    pub fn load(&mut self, body: &[u8]) -> Result<Sha, Reply> {
        let sha = script_sha(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, shebang_len) =
            parse_shebang(body).map_err(|e| Reply::error(format!("ERR {e}")))?;
        // Redis's Lua refuses binary chunks: a body starting with the
        // bytecode signature is text to it, and fails to lex as such. A
        // leading space keeps that error (and the line numbers).
        let source = &body[shebang_len..];
        let text: std::borrow::Cow<[u8]> = if source.first() == Some(&0x1b) {
            let mut spaced = Vec::with_capacity(source.len() + 1);
            spaced.push(b' ');
            spaced.extend_from_slice(source);
            spaced.into()
        } else {
            source.into()
        };
        let function = self
            .lua
            .load(&*text)
            .set_name(USER_CHUNK)
            .into_function()
            .map_err(|e| {
                let message = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    mlua::Error::MemoryError(m) => m,
                    other => other.to_string(),
                };
                Reply::error(command::error_text(
                    format!("ERR Error compiling script (new function): {message}").as_bytes(),
                ))
            })?;
        self.scripts_bytes += body.len() + sha.len();
        self.scripts.insert(sha, Script { flags, function });
        Ok(sha)
    }

    /// The flags of a cached script.
    pub fn flags(&self, sha: &Sha) -> Option<ScriptFlags> {
        self.scripts.get(sha).map(|s| s.flags)
    }

    /// Runs the cached script `sha` for the command in `ctx` (EVAL and
    /// friends, after the cache lookup): `keys` and `args` become `KEYS`
    /// and `ARGV`; `read_only` for EVAL_RO/EVALSHA_RO. Returns the reply.
    pub fn run(
        &mut self,
        ctx: &mut Ctx,
        sha: &Sha,
        keys: &[&[u8]],
        args: &[&[u8]],
        read_only: bool,
    ) -> Reply {
        let Some(script) = self.scripts.get(sha) else {
            return Reply::err(NOSCRIPT_ERR);
        };
        let flags = script.flags;
        if let Err(refusal) = prepare(ctx, flags, read_only) {
            return refusal;
        }
        let function = script.function.clone();
        if let Err(e) = self.set_arrays(keys, args) {
            return Reply::error(format!("ERR Error running script: {e}"));
        }
        ctx.core.tracking.begin_script(ctx.session.id, keys);
        self.run_prepared(
            ctx,
            Callable::Script(function),
            flags,
            sha_text(sha),
            read_only,
        )
    }

    /// Runs a function library's callback for FCALL / FCALL_RO: `name`
    /// for errors and `keys`/`args` as its two arguments. Returns the
    /// reply.
    pub fn call_function(
        &mut self,
        ctx: &mut Ctx,
        callee: Callee<'_>,
        keys: &[&[u8]],
        args: &[&[u8]],
        read_only: bool,
    ) -> Reply {
        let Callee {
            callback,
            flags,
            name,
        } = callee;
        if let Err(refusal) = prepare(ctx, flags, read_only) {
            return refusal;
        }
        ctx.core.tracking.begin_script(ctx.session.id, keys);
        let callable = Callable::Function(callback, keys, args);
        self.run_prepared(ctx, callable, flags, name, read_only)
    }

    /// Compiles and runs a library's code (`body`, the source after its
    /// metadata line) so that it registers its functions: the
    /// registrations in order, or Redis's error text (without `ERR `).
    /// `limit_ms` stops code that runs longer (0: no limit).
    pub fn load_library(&mut self, body: &[u8], limit_ms: u64) -> Result<Vec<Registered>, String> {
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .into_function()
            .map_err(|e| {
                let message = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    mlua::Error::MemoryError(m) => m,
                    other => other.to_string(),
                };
                format!("Error compiling function: {message}")
            })?;
        let w = &self.watch;
        w.started_ns.store(
            crate::core::stats_clock::nanos_since(w.base),
            Ordering::Relaxed,
        );
        w.load_timed_out.store(false, Ordering::Relaxed);
        w.load_limit_ms.store(limit_ms, Ordering::Relaxed);
        let outcome = self.load_library.call::<(bool, Value)>(chunk);
        w.load_limit_ms.store(0, Ordering::Relaxed);
        if w.load_timed_out.swap(false, Ordering::Relaxed) {
            return Err("Error registering functions: ERR FUNCTION LOAD timeout".into());
        }
        let message = match outcome {
            Ok((true, Value::Table(list))) => return registrations(&list),
            Ok((_, Value::Table(e))) => match e.get::<Value>("err") {
                Ok(Value::String(m)) => m.to_string_lossy(),
                _ => "ERR unknown error".into(),
            },
            Ok((_, Value::String(m))) => format!("ERR {}", m.to_string_lossy()),
            Ok((_, other)) => format!("ERR {other:?}"),
            Err(e) => format!("ERR {e}"),
        };
        Err(format!("Error registering functions: {message}"))
    }

    /// Runs a prepared script or function (Redis's `scriptPrepareForRun`
    /// done): the busy watch, the bridge, the reply or error.
    fn run_prepared(
        &mut self,
        ctx: &mut Ctx,
        callable: Callable,
        flags: ScriptFlags,
        name: &str,
        read_only: bool,
    ) -> Reply {
        let is_function = matches!(callable, Callable::Function(..));
        self.session.db = ctx.session.db;
        self.session.resp = 2;
        let mut state = RunState {
            function: is_function,
            read_only: read_only || (!flags.compat && flags.no_writes),
            allow_oom: !flags.compat && flags.allow_oom,
            wrote: false,
            log_effects: true,
            stop: None,
        };
        let threshold_ms = ctx.core.config.busy_reply_threshold_ms;
        self.arm_watch(threshold_ms);
        let effects_before = ctx.core.effects.len();
        let outcome = {
            let mut running = Running {
                ctx: &mut *ctx,
                session: &mut self.session,
                state: &mut state,
            };
            let _active = ActiveGuard::set(&self.active, &mut running);
            match callable {
                Callable::Script(function) => self
                    .runner
                    .call::<(bool, Value)>((function, self.bridge.clone())),
                // One protected call through a C function made once: it
                // builds the key and argument arrays where the wrapper
                // runs, from the slices the light userdata points at (on
                // this stack frame for the whole call).
                Callable::Function(function, keys, args) => {
                    let arrays = Arrays { keys, args };
                    let ptr = (&arrays as *const Arrays).cast_mut().cast();
                    self.fcall_entry.call::<(bool, Value)>((
                        &self.run_function,
                        function,
                        &self.bridge,
                        mlua::LightUserData(ptr),
                    ))
                }
            }
        };
        ctx.core.tracking.end_script();
        self.watch.threshold_ms.store(0, Ordering::Relaxed);
        let timed_out = self.watch.timed_out.load(Ordering::Relaxed);
        self.watch.killed.store(false, Ordering::Relaxed);
        self.watch.timed_out.store(false, Ordering::Relaxed);
        if timed_out {
            ctx.host.log(
                crate::config::LogLevel::Warning,
                "Slow script finished (busy state ended)",
            );
        }
        if state.stop == Some(Stop::Shutdown) {
            // The server exits without saving: what the script did must not
            // reach the AOF half done.
            ctx.core.effects.truncate(effects_before);
        }
        let reply = match outcome {
            Ok((true, value)) => convert::lua_to_reply(&self.lua, value, self.session.resp),
            Ok((false, error)) => {
                let stop_message = match state.stop {
                    Some(Stop::Kill) => Some("ERR Script killed by user with SCRIPT KILL..."),
                    Some(Stop::Shutdown) => Some("ERR Script killed by SHUTDOWN NOSAVE"),
                    None => None,
                };
                convert::script_error(&error, name, stop_message)
            }
            Err(e) if is_function => Reply::error(command::error_text(
                format!("ERR Error running function {name}: {e}").as_bytes(),
            )),
            Err(e) => Reply::error(command::error_text(
                format!("ERR Error running script {name}: {e}").as_bytes(),
            )),
        };
        reply
    }

    /// Sets `KEYS` and `ARGV` (new tables each run, as in Redis) in one
    /// protected call.
    fn set_arrays(&self, keys: &[&[u8]], args: &[&[u8]]) -> mlua::Result<()> {
        let arrays = Arrays { keys, args };
        let ptr = (&arrays as *const Arrays).cast_mut().cast();
        self.set_arrays_entry
            .call::<()>((&self.globals, mlua::LightUserData(ptr)))
    }

    fn arm_watch(&self, threshold_ms: u64) {
        let w = &self.watch;
        w.started_ns.store(
            crate::core::stats_clock::nanos_since(w.base),
            Ordering::Relaxed,
        );
        w.threshold_ms.store(threshold_ms, Ordering::Relaxed);
        w.killed.store(false, Ordering::Relaxed);
        w.timed_out.store(false, Ordering::Relaxed);
    }
}

/// Installs the count hook that watches running scripts (once per Lua
/// state; it does nothing while `busy-reply-threshold` is 0, as Redis then
/// sets no hook at all).
fn install_hook(lua: &Lua, watch: Arc<Watch>) -> mlua::Result<()> {
    let triggers = HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS);
    lua.set_hook(triggers, move |lua, _debug| {
        if watch.killed.load(Ordering::Relaxed) {
            return Err(mlua::Error::runtime("Script killed"));
        }
        let load_limit_ms = watch.load_limit_ms.load(Ordering::Relaxed);
        if load_limit_ms > 0 && watch.elapsed() > Duration::from_millis(load_limit_ms) {
            watch.load_timed_out.store(true, Ordering::Relaxed);
            return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
        }
        let threshold_ms = watch.threshold_ms.load(Ordering::Relaxed);
        if threshold_ms == 0 || watch.elapsed() < Duration::from_millis(threshold_ms) {
            return Ok(VmState::Continue);
        }
        let Ok(bridge) = lua.named_registry_value::<Function>(BRIDGE_KEY) else {
            return Ok(VmState::Continue);
        };
        let stop: bool = bridge.call(5)?;
        if stop {
            watch.killed.store(true, Ordering::Relaxed);
            return Err(mlua::Error::runtime("Script killed"));
        }
        Ok(VmState::Continue)
    })
}

/// Redis's `scriptPrepareForRun` checks for scripts that declare flags.
fn prepare(ctx: &mut Ctx, flags: ScriptFlags, read_only: bool) -> Result<(), Reply> {
    if flags.compat {
        return Ok(());
    }
    // Redis's processCommand with the script's flags as the command's: a
    // writing script on a read-only replica, any script without
    // `allow-stale` on a stale one.
    if !ctx.core.loading {
        let writes = !flags.no_writes;
        if let Some(refusal) =
            ctx.core
                .replica_refusal(writes, flags.allow_stale, ctx.session.is_master)
        {
            return Err(Reply::err(refusal));
        }
    }
    if flags.no_writes {
        return Ok(());
    }
    if let Some(refusal) = ctx.core.write_refusal() {
        let cause = refusal
            .strip_prefix("MISCONF Errors writing to the AOF file: ")
            .unwrap_or(&refusal)
            .to_string();
        return Err(Reply::error(
            if refusal.starts_with("MISCONF Errors writing to the AOF") {
                format!(
                "MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {cause}"
            )
            } else {
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.".to_string()
            },
        ));
    }
    if let Some(refusal) = ctx.core.noreplicas_refusal() {
        return Err(Reply::err(refusal));
    }
    if read_only {
        return Err(Reply::err(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    // Out of memory when the command started (docs/memory.md): a writing
    // script must declare `allow-oom` to run.
    if ctx.core.evict.pre_command_oom && ctx.core.config.maxmemory != 0 && !flags.allow_oom {
        return Err(Reply::error(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
        ));
    }
    Ok(())
}

/// REDIS_VERSION_NUM for the version we report (0x00MMmmpp).
fn redis_version_num() -> i64 {
    let mut parts = crate::command::server::REDIS_VERSION
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    let patch = parts.next().unwrap_or(0);
    (major << 16) | (minor << 8) | patch
}

/// The bridge (for everything but redis.call/pcall, which are C
/// functions of their own): `op` 2 sets the
/// protocol, 3 the replication flags, 4 checks a command (acl_check_cmd),
/// 5 is the count hook's poll while busy, 6 writes to the log.
fn bridge(
    lua: &Lua,
    ctx: &mut Ctx,
    session: &mut Session,
    state: &mut RunState,
    watch: &Watch,
    args: MultiValue,
) -> mlua::Result<MultiValue> {
    let mut args = args.into_iter();
    let op = match args.next() {
        Some(Value::Integer(op)) => op,
        Some(Value::Number(op)) => op as i64,
        _ => 0,
    };
    match op {
        2 => {
            if let Some(Value::Integer(resp)) = args.next() {
                session.resp = if resp == 3 { 3 } else { 2 };
            }
            Ok(MultiValue::new())
        }
        3 => {
            if let Some(Value::Integer(flags)) = args.next() {
                state.log_effects = flags & 1 != 0;
            }
            Ok(MultiValue::new())
        }
        4 => match command_argv(args) {
            Ok(argv) => {
                let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                if let Ok((top, spec)) = command::resolve(&refs) {
                    let allowed = command::acl::permitted(ctx.core, ctx.session, top, spec, &refs);
                    (true, allowed.is_ok()).into_lua_multi(lua)
                } else if command::lookup(refs[0]).is_some() {
                    (true, true).into_lua_multi(lua)
                } else {
                    let t = convert::error_table(
                        lua,
                        "ERR Invalid command passed to redis.acl_check_cmd()",
                        false,
                    )?;
                    (false, t).into_lua_multi(lua)
                }
            }
            Err(text) => (false, convert::error_table(lua, text, false)?).into_lua_multi(lua),
        },
        5 => {
            if !watch.timed_out.swap(true, Ordering::Relaxed) {
                ctx.host.log(
                    crate::config::LogLevel::Warning,
                    &format!(
                        "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the SCRIPT KILL command.",
                        watch.elapsed().as_millis()
                    ),
                );
            }
            let busy = BusyScript {
                wrote: state.wrote,
                function: state.function,
            };
            let stop = match ctx.host.while_busy(&busy, ctx.core) {
                BusyAction::Continue => None,
                BusyAction::Kill if !state.wrote => Some(Stop::Kill),
                BusyAction::Kill => None,
                BusyAction::ShutdownNoSave => Some(Stop::Shutdown),
            };
            if stop.is_some() {
                state.stop = stop;
                ctx.host.log(
                    crate::config::LogLevel::Warning,
                    if stop == Some(Stop::Kill) {
                        "Lua script killed by user with SCRIPT KILL."
                    } else {
                        "Lua script stopped by SHUTDOWN NOSAVE."
                    },
                );
            }
            stop.is_some().into_lua_multi(lua)
        }
        6 => {
            let level = match args.next() {
                Some(Value::Integer(l)) => l,
                _ => 2,
            };
            let text = match args.next() {
                Some(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                _ => String::new(),
            };
            let level = match level {
                0 => crate::config::LogLevel::Debug,
                1 => crate::config::LogLevel::Verbose,
                2 => crate::config::LogLevel::Notice,
                _ => crate::config::LogLevel::Warning,
            };
            ctx.host.log(level, &text);
            Ok(MultiValue::new())
        }
        _ => Ok(MultiValue::new()),
    }
}

use mlua::IntoLuaMulti;

/// The arguments of `redis.acl_check_cmd` as a command (Redis's
/// `luaArgsToRedisArgv`): strings as they are, numbers as `%.17g`.
fn command_argv(args: impl Iterator<Item = Value>) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut argv = Vec::new();
    for v in args {
        let bytes = match v {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => crate::types::num::format_g17(i as f64).into_bytes(),
            Value::Number(n) => crate::types::num::format_g17(n).into_bytes(),
            _ => return Err("ERR Lua redis lib command arguments must be strings or integers"),
        };
        argv.push(bytes);
    }
    if argv.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    Ok(argv)
}

/// Runs one command from a script (Redis's `scriptCall`): the checks
/// scripts add, then the command on the scripts' client. Err is the error
/// text (with its code) of a refused command.
fn call(
    ctx: &mut Ctx,
    session: &mut Session,
    state: &mut RunState,
    refs: &[&[u8]],
) -> Result<Reply, String> {
    // rename-command applies to scripts too (Redis looks their commands
    // up in the same renamed table): the new name runs the command, the
    // old one is unknown.
    let renamed: Vec<&[u8]>;
    let mut refs = refs;
    match ctx.core.config.command_renames.resolve(refs[0]) {
        crate::config::CommandName::Unchanged => {}
        crate::config::CommandName::Renamed(real) => {
            renamed = std::iter::once(real.as_bytes())
                .chain(refs[1..].iter().copied())
                .collect();
            refs = &renamed;
        }
        crate::config::CommandName::Removed => {
            return Err("ERR Unknown Redis command called from script".into());
        }
    }
    let (top, spec) = match command::resolve(refs) {
        Ok(found) => found,
        Err(_) => {
            let known = command::lookup(refs[0]).is_some_and(|top| {
                top.subcommands.is_empty()
                    || refs.len() < 2
                    || refs.get(1).is_some_and(|sub| top.subcommand(sub).is_some())
            });
            return Err(if known {
                "ERR Wrong number of args calling Redis command from script".into()
            } else {
                "ERR Unknown Redis command called from script".into()
            });
        }
    };
    if spec.has(flags::NOSCRIPT) && !ctx.core.debug.allow_noscript_in_scripts {
        return Err("ERR This Redis command is not allowed from script".into());
    }
    // The caller's ACL user (Redis's `scriptVerifyACL`).
    command::acl::check_from_script(ctx.core, ctx.session, &*ctx.host, top, spec, refs)?;
    if state.read_only && (spec.is_write() || spec.has(flags::MAY_REPLICATE)) {
        return Err("ERR Write commands are not allowed from read-only scripts.".into());
    }
    // The scripts' client acts for the caller: the master's scripts write
    // on a read-only replica and see keys past their TTL.
    session.is_master = ctx.session.is_master;
    session.user.clone_from(&ctx.session.user);
    if spec.is_write() && !ctx.core.loading {
        if let Some(refusal) = ctx.core.replica_refusal(true, true, session.is_master) {
            return Err(refusal.to_string());
        }
    }
    if spec.is_write() && !state.wrote && !ctx.core.loading {
        if let Some(refusal) = ctx.core.write_refusal() {
            return Err(refusal);
        }
    }
    if spec.is_write() && !ctx.core.loading {
        if let Some(refusal) = ctx.core.noreplicas_refusal() {
            return Err(refusal.into());
        }
    }
    // Redis's scriptVerifyOOM: out of memory when the script started, a
    // deny-oom command is refused until the script's first write.
    if spec.has(flags::DENYOOM)
        && !state.allow_oom
        && !state.wrote
        && !session.is_master
        && ctx.core.evict.pre_command_oom
        && ctx.core.config.maxmemory != 0
    {
        return Err(crate::core::evict::OOM_ERROR.into());
    }
    if spec.is_write() {
        state.wrote = true;
    }
    ctx.core.stats.commands_processed += 1;
    let effects_before = ctx.core.effects.len();
    let now = ctx.now_ms;
    let mut inner = Ctx::new(&mut *ctx.core, session, &mut *ctx.host, now);
    inner.deny_blocking = true;
    inner.in_script = true;
    let started = crate::core::stats_clock::now();
    let reply = match (spec.handler)(&mut inner, refs) {
        Ok(r) | Err(r) => r,
    };
    let dirty = inner.dirty;
    let logged_custom = inner.logged_custom;
    if ctx.core.monitors.active() {
        crate::command::monitor::feed_call(ctx.core, spec, refs, session.db, None);
    }
    command::observe::nested_call(
        ctx.core,
        session,
        &*ctx.host,
        (top, spec),
        refs,
        started,
        &reply,
        true,
    );
    if spec.has(flags::READONLY) {
        // Client-side caching: the script's keys are its caller's reads.
        ctx.core.tracking.script_read();
    }
    ctx.core.dirty += dirty;
    if dirty > 0 && !logged_custom {
        ctx.core.effects.push(Effect {
            db: session.db,
            argv: refs.iter().map(|a| a.to_vec()).collect(),
        });
    }
    if !state.log_effects {
        // redis.set_repl without REPL_AOF: Redis does not propagate what
        // the command did (the user asked for it explicitly).
        ctx.core.effects.truncate(effects_before);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests;
