-- hozon's script environment: run once on every new Lua state, after the
-- standard and Redis libraries are loaded, with a table of Rust helpers.
-- It builds the `redis` table, Redis's math.random and pcall, the error
-- handler that attributes errors to a line of the user's script, and the
-- read-only sandbox (Redis 7.0 patches Lua with read-only tables; vanilla
-- Lua 5.1 gets the same effect from proxies). Returns the function that
-- runs one script and the table that holds the globals.
--
-- The chunk is named "=hozon": the error handler skips its frames so
-- errors raised by these wrappers point at the caller's line, as errors
-- raised by Redis's C functions do.

local helpers = ...

local error, type, tostring, tonumber, select = error, type, tostring, tonumber, select
local rawget, rawset, next, pairs, ipairs = rawget, rawset, next, pairs, ipairs
local setmetatable, getmetatable = setmetatable, getmetatable
-- Lua 5.1's pcall and xpcall push their status past the stack space a C
-- function may use when the callee returned many values (harmless in a
-- release build, an API-check abort in a debug one): these are the same
-- functions with a stack check first (src/script/mod.rs).
local raw_pcall, raw_xpcall = helpers.pcall, helpers.xpcall
local co_resume = coroutine.resume
local getinfo = debug.getinfo
local floor = math.floor
local concat = table.concat
local lower = string.lower

local random, srandom = helpers.random, helpers.srandom
local sha1hex, log, killed = helpers.sha1hex, helpers.log, helpers.killed

-- The per-run bridge to the engine (a Rust function valid only while a
-- script runs): bridge(op, ...). Ops: 1 call, 2 setresp, 3 set_repl,
-- 4 acl_check_cmd, 5 the busy poll (from the count hook), 6 log.
local bridge = nil

local function err_table(msg)
  return { err = msg }
end

-- ---------------------------------------------------------------------
-- redis.* and math.random
--
-- Redis implements these in C. A tail call (`return redis.call(...)`) to
-- a C function keeps the caller's frame, and an error a C function raises
-- is attributed to the caller's line; a Lua function would lose both. So
-- each is written here as an implementation returning a status, and
-- exposed through helpers.wrap, a C closure that calls it and then
-- returns the values after a `true` status, raises the value after a
-- `false` status as it is, or after a 'where' status raises it prefixed
-- with the caller's position (what luaL_error does in C).

local wrap = helpers.wrap
local function trunc(x) return x >= 0 and floor(x) or -floor(-x) end

local redis = {}

local function not_running(what)
  return false, err_table('ERR ' .. what .. ' can only be called inside a script invocation')
end

-- redis.call and redis.pcall are C functions of their own
-- (src/script/mod.rs, command_c): they read the command from the Lua
-- stack and push its reply without a Lua round trip.
redis.call = helpers.redis_call
redis.pcall = helpers.redis_pcall

redis.setresp = wrap(function(...)
  if bridge == nil then return not_running('redis.setresp') end
  if select('#', ...) ~= 1 then return false, err_table('ERR redis.setresp() requires one argument.') end
  local resp = trunc(tonumber((...)) or 0)
  if resp ~= 2 and resp ~= 3 then return false, err_table('ERR RESP version must be 2 or 3.') end
  bridge(2, resp)
  return true
end)

redis.set_repl = wrap(function(...)
  if bridge == nil then return not_running('redis.set_repl') end
  if select('#', ...) ~= 1 then return false, err_table('ERR redis.set_repl() requires two arguments.') end
  local flags = trunc(tonumber((...)) or 0)
  if flags < 0 or flags > 3 then
    return false, err_table('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
  bridge(3, flags)
  return true
end)

redis.acl_check_cmd = wrap(function(...)
  if bridge == nil then return not_running('redis.acl_check_cmd') end
  return bridge(4, ...)
end)

redis.sha1hex = wrap(function(...)
  if select('#', ...) ~= 1 then return false, err_table('ERR wrong number of arguments') end
  return true, sha1hex((...))
end)

local function trim_crlf(s)
  return (s:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', ''))
end

function redis.error_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  -- "-CODE message": the code is up to the first space; no space means
  -- the whole text is the message, under ERR.
  local space = s:find(' ', 1, true)
  if space == nil then
    return err_table('ERR ' .. trim_crlf(s:sub(2)))
  end
  return err_table(s:sub(2, space - 1) .. ' ' .. trim_crlf(s:sub(space + 1)))
end

function redis.status_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  return { ok = s }
end

redis.log = wrap(function(...)
  local argc = select('#', ...)
  if argc < 2 then return false, err_table('ERR redis.log() requires two arguments or more.') end
  local level = tonumber((...))
  if level == nil then return false, err_table('ERR First argument must be a number (log level).') end
  level = trunc(level)
  if level < 0 or level > 3 then return false, err_table('ERR Invalid debug level.') end
  local parts = {}
  for j = 2, argc do
    local v = select(j, ...)
    local t = type(v)
    if t == 'string' or t == 'number' then parts[#parts + 1] = tostring(v) end
  end
  log(level, concat(parts, ' '))
  return true
end)

function redis.breakpoint() return false end
function redis.debug() end
function redis.replicate_commands() return true end

redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = helpers.version
redis.REDIS_VERSION_NUM = helpers.version_num

-- math.random / math.randomseed: Lua 5.1's own functions over Redis's
-- lrand48, which continues across scripts (Redis 7.0 never reseeds it).

-- luaL_checkint: a number or numeric string, truncated to a C int; nil
-- and the error text otherwise.
local function checkint(argc, i, fname, v)
  local x = tonumber(v)
  if x == nil or (type(v) ~= 'number' and type(v) ~= 'string') then
    local got = i > argc and 'no value' or type(v)
    return nil, "bad argument #" .. i .. " to '" .. fname .. "' (number expected, got " .. got .. ")"
  end
  if x ~= x or x >= 9223372036854775808 or x < -9223372036854775808 then
    return 0
  end
  x = trunc(x) % 4294967296
  if x >= 2147483648 then x = x - 4294967296 end
  return x
end

math.random = wrap(function(...)
  local argc = select('#', ...)
  local r = random()
  if argc == 0 then return true, r end
  if argc == 1 then
    local u, e = checkint(argc, 1, 'random', (...))
    if u == nil then return 'where', e end
    if not (1 <= u) then return 'where', "bad argument #1 to 'random' (interval is empty)" end
    return true, floor(r * u) + 1
  end
  if argc == 2 then
    local lo, hi = ...
    local e
    lo, e = checkint(argc, 1, 'random', lo)
    if lo == nil then return 'where', e end
    hi, e = checkint(argc, 2, 'random', hi)
    if hi == nil then return 'where', e end
    if not (lo <= hi) then return 'where', "bad argument #2 to 'random' (interval is empty)" end
    return true, floor(r * (hi - lo + 1)) + lo
  end
  return 'where', 'wrong number of arguments'
end)

math.randomseed = wrap(function(...)
  local seed, e = checkint(select('#', ...), 1, 'randomseed', (...))
  if seed == nil then return 'where', e end
  srandom(seed)
  return true
end)

-- ---------------------------------------------------------------------
-- pcall as Redis 7.0 has it: an error table with an `err` string is
-- returned as that string. A killed script's error cannot be caught.

local function pcall_result(ok, ...)
  if ok then return true, ... end
  local e = ...
  if killed() then error(e, 0) end
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then return false, m end
  end
  return false, e
end

pcall = function(f, ...)
  return pcall_result(raw_pcall(f, ...))
end

local function rethrow_if_killed(ok, ...)
  if not ok and killed() then error((...), 0) end
  return ok, ...
end

xpcall = function(f, handler)
  return rethrow_if_killed(raw_xpcall(f, handler))
end

coroutine.resume = function(co, ...)
  return rethrow_if_killed(co_resume(co, ...))
end

-- ---------------------------------------------------------------------
-- The error handler: errors become {err=..., source=..., line=...}, the
-- line being the user's (a C function or one of the wrappers above that
-- raised it is skipped).

local function err_handler(err)
  local level = 2
  local info = getinfo(level, 'nSl')
  if info and info.what == 'C' then
    level = level + 1
    info = getinfo(level, 'nSl')
  end
  while info and (info.source == '=hozon' or info.what == 'tail') do
    level = level + 1
    info = getinfo(level, 'nSl')
  end
  if type(err) ~= 'table' then
    err = { err = 'ERR ' .. tostring(err) }
  end
  if info then
    err.source = info.source
    err.line = info.currentline
  end
  return err
end

-- ---------------------------------------------------------------------
-- The sandbox. Globals live in `real`; the globals table itself (what
-- _G, getfenv(0) and loadstring's chunks see) becomes an empty proxy that
-- reads through to `real` and refuses writes. Reading a global that does
-- not exist is an error. Library tables are replaced by read-only proxies.

local READONLY = 'Attempt to modify a readonly table'
local proxies = setmetatable({}, { __mode = 'k' }) -- proxy -> real table
local fake_metatables = setmetatable({}, { __mode = 'k' })

local function refuse_write()
  error(READONLY, 2)
end

local function protect(t)
  local proxy = {}
  proxies[proxy] = t
  for k, v in next, t do
    if type(v) == 'table' and proxies[v] == nil then
      rawset(t, k, protect(v))
    end
  end
  return setmetatable(proxy, { __index = t, __newindex = refuse_write, __metatable = false })
end

-- The raw-access builtins see through the proxies (and refuse to write
-- them), as they see through Redis's read-only tables.
local safe_rawset = wrap(function(t, k, v)
  if proxies[t] ~= nil then return false, READONLY end
  return true, rawset(t, k, v)
end)

local function safe_rawget(t, k)
  local r = proxies[t]
  if r ~= nil then return rawget(r, k) end
  return rawget(t, k)
end

local function safe_next(t, k)
  local r = proxies[t]
  if r ~= nil then return next(r, k) end
  return next(t, k)
end

local function safe_pairs(t)
  if proxies[t] ~= nil then return safe_next, t, nil end
  return pairs(t)
end

local function safe_ipairs(t)
  local r = proxies[t]
  if r ~= nil then return ipairs(r) end
  return ipairs(t)
end

local safe_setmetatable = wrap(function(t, mt)
  if proxies[t] ~= nil then return false, READONLY end
  return true, setmetatable(t, mt)
end)

-- The strings' shared metatable, as scripts see it: read-only (as in
-- Redis 7.0), so no script can change how every other script's strings
-- behave. Set below, once the string library is protected.
local string_mt_view

local function safe_getmetatable(t)
  if proxies[t] ~= nil then return fake_metatables[t] end
  if type(t) == 'string' and string_mt_view ~= nil then return string_mt_view end
  return getmetatable(t)
end

-- Redis's Lua does not load binary chunks: to its lexer they are text
-- that fails at the first byte. A leading space gives the same error.
local raw_loadstring, raw_load = loadstring, load

local function safe_loadstring(s, chunkname)
  if type(s) == 'string' and s:byte(1) == 27 then
    return raw_loadstring(' ' .. s, chunkname or s)
  end
  return raw_loadstring(s, chunkname)
end

local function safe_load(f, chunkname)
  if type(f) ~= 'function' then return raw_load(f, chunkname) end
  local pieces = {}
  while true do
    local piece = f()
    if piece == nil or piece == '' then break end
    if type(piece) ~= 'string' then return nil, 'reader function must return a string' end
    pieces[#pieces + 1] = piece
  end
  return safe_loadstring(concat(pieces), chunkname or '=(load)')
end

local G = _G
local real = {}
for k, v in next, G do real[k] = v end
for k in next, real do rawset(G, k, nil) end

-- Redis 7.0's Lua has no getfenv, setfenv or newproxy either.
real.print, real.dofile, real.loadfile, real.debug = nil, nil, nil, nil
real.getfenv, real.setfenv, real.newproxy = nil, nil, nil
real.__redis__err__handler = err_handler
real.rawset, real.rawget, real.next, real.pairs, real.ipairs = safe_rawset, safe_rawget, safe_next, safe_pairs, safe_ipairs
real.setmetatable, real.getmetatable = safe_setmetatable, safe_getmetatable
real.loadstring, real.load = safe_loadstring, safe_load
real.redis = redis
for _, name in ipairs({ 'string', 'math', 'table', 'coroutine', 'redis', 'cjson', 'bit', 'struct', 'cmsgpack' }) do
  local lib = real[name]
  if type(lib) == 'table' then real[name] = protect(lib) end
end
real._G = G

local string_mt = getmetatable('')
if string_mt then
  string_mt.__index = real.string
  string_mt_view = protect(string_mt)
end

local function missing_global(_, k)
  local t = type(k)
  if t ~= 'string' and t ~= 'number' then
    error('Second argument to luaProtectedTableError must be a string or number', 2)
  end
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

setmetatable(real, { __index = missing_global })
local G_mt_view = { __index = missing_global }
local G_meta = { __index = real, __newindex = refuse_write, __metatable = false }
setmetatable(G, G_meta)
proxies[G] = real
fake_metatables[G] = protect(G_mt_view)

-- Runs one script (a function of no arguments) with `b` as the bridge:
-- returns true and its first result, or false and the error table.
local function run(f, b)
  bridge = b
  local ok, result = raw_xpcall(f, err_handler)
  bridge = nil
  return ok, result
end

-- ---------------------------------------------------------------------
-- Function libraries (FUNCTION LOAD, Redis's function_lua.c). While a
-- library's code runs, the globals it sees are only `redis` with
-- register_function, log, the LOG_* levels and the version: anything else
-- is a nonexistent global. Registrations are collected in `registering`;
-- outside a load register_function refuses.

local registering = nil

local FLAGS = {
  ['no-writes'] = 1, ['allow-oom'] = 2, ['allow-stale'] = 4,
  ['no-cluster'] = 8, ['allow-cross-slot-keys'] = 16,
}

local function stringish(v)
  local t = type(v)
  return t == 'string' or t == 'number'
end

local function read_flags(list)
  local mask, j = 0, 1
  while true do
    local f = list[j]
    if f == nil then return mask end
    if not stringish(f) then return nil end
    local bit = FLAGS[lower(tostring(f))]
    if bit == nil then return nil end
    if mask % (bit * 2) < bit then mask = mask + bit end
    j = j + 1
  end
end

local function named_args(t)
  if type(t) ~= 'table' then
    return nil, 'calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).'
  end
  local name, desc, callback, flags = nil, nil, nil, 0
  for k, v in next, t do
    if not stringish(k) then
      return nil, 'named argument key given to redis.register_function is not a string'
    end
    local key = lower(tostring(k))
    if key == 'function_name' then
      if not stringish(v) then return nil, 'function_name argument given to redis.register_function must be a string' end
      name = tostring(v)
    elseif key == 'description' then
      if not stringish(v) then return nil, 'description argument given to redis.register_function must be a string' end
      desc = tostring(v)
    elseif key == 'callback' then
      if type(v) ~= 'function' then return nil, 'callback argument given to redis.register_function must be a function' end
      callback = v
    elseif key == 'flags' then
      if type(v) ~= 'table' then return nil, 'flags argument to redis.register_function must be a table representing function flags' end
      flags = read_flags(v)
      if flags == nil then return nil, 'unknown flag given' end
    else
      return nil, 'unknown argument given to redis.register_function'
    end
  end
  if name == nil then return nil, 'redis.register_function must get a function name argument' end
  if callback == nil then return nil, 'redis.register_function must get a callback argument' end
  return { name = name, desc = desc, callback = callback, flags = flags }
end

local function positional_args(name, callback)
  if not stringish(name) then return nil, 'first argument to redis.register_function must be a string' end
  if type(callback) ~= 'function' then return nil, 'second argument to redis.register_function must be a function' end
  return { name = tostring(name), callback = callback, flags = 0 }
end

local function valid_name(name)
  return name ~= '' and name:find('^[%w_]+$') ~= nil
end

local register_function = wrap(function(...)
  if registering == nil then
    return false, err_table('ERR redis.register_function can only be called on FUNCTION LOAD command')
  end
  local argc = select('#', ...)
  local entry, e
  if argc == 1 then
    entry, e = named_args(...)
  elseif argc == 2 then
    entry, e = positional_args(...)
  else
    e = 'wrong number of arguments to redis.register_function'
  end
  if entry == nil then return false, err_table('ERR ' .. e) end
  if not valid_name(entry.name) then
    return false, err_table('ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  for _, other in ipairs(registering) do
    if other.name == entry.name then
      return false, err_table('ERR Function already exists in the library')
    end
  end
  registering[#registering + 1] = entry
  return true
end)

local lib_redis = setmetatable({
  register_function = register_function,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = helpers.version, REDIS_VERSION_NUM = helpers.version_num,
}, { __index = missing_global })
local lib_globals = setmetatable({ redis = protect(lib_redis) }, { __index = missing_global })

-- Runs a library's compiled code (a function of no arguments) with the
-- library globals: returns true and the registrations, or false and the
-- error (a table with `err`, or a string).
local function load_library(chunk)
  registering = {}
  G_meta.__index = lib_globals
  local ok, e = raw_pcall(chunk)
  G_meta.__index = real
  local registered = registering
  registering = nil
  if ok then return true, registered end
  return false, e
end

-- What a function's callback sees at run time: the globals of a script,
-- but a `redis` without breakpoint, debug and replicate_commands (Redis
-- registers those for EVAL only; its function engine's Lua has only
-- luaRegisterRedisAPI's fields).
local fn_redis = {}
for k, v in next, proxies[real.redis] do
  if k ~= 'breakpoint' and k ~= 'debug' and k ~= 'replicate_commands' then fn_redis[k] = v end
end
local fn_globals = setmetatable({ redis = protect(fn_redis) }, { __index = real })

-- Runs a function's callback with the key and argument arrays, as run
-- does a script.
-- The call run_function makes, kept in locals rather than a closure
-- built per call.
local pending_f, pending_keys, pending_args = nil, nil, nil
local function call_pending()
  return pending_f(pending_keys, pending_args)
end

local function run_function(f, b, keys, args)
  bridge = b
  G_meta.__index = fn_globals
  pending_f, pending_keys, pending_args = f, keys, args
  local ok, result = raw_xpcall(call_pending, err_handler)
  pending_f, pending_keys, pending_args = nil, nil, nil
  G_meta.__index = real
  bridge = nil
  return ok, result
end

return run, real, load_library, run_function
