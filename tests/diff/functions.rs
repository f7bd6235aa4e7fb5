//! Differential tests for Redis Functions: FUNCTION LOAD / DELETE / FLUSH /
//! LIST / DUMP / RESTORE / STATS / KILL / HELP and FCALL / FCALL_RO,
//! checked byte for byte against Redis 7.0.15 in RESP2 and RESP3, with
//! Redis's `tests/unit/functions.tcl` as the checklist (busy functions are
//! in `functions_busy`, FUNCTION DUMP and RESTORE in `functions_dump`).
//!
//! Redis keeps libraries, and the functions of a library, in hash tables
//! with a random seed: FUNCTION LIST over several libraries (or a library of
//! several functions) comes in an order of its own on each run. Those
//! replies are compared one library at a time, or not at all.

use crate::harness::{show, Pair};

/// A library's code: the `#!lua name=<name>` line, then `body`.
pub(crate) fn lib(name: &str, body: &str) -> String {
    format!("#!lua name={name}\n{body}")
}

/// Redis's `get_function_code`: library `name` with one function `fname`
/// whose body is `body`.
pub(crate) fn one(name: &str, fname: &str, body: &str) -> String {
    lib(
        name,
        &format!("redis.register_function('{fname}', function(KEYS, ARGV)\n {body} \nend)"),
    )
}

/// Redis's `get_no_writes_function_code`.
fn no_writes(name: &str, fname: &str, body: &str) -> String {
    lib(
        name,
        &format!(
            "redis.register_function{{function_name='{fname}', callback=function(KEYS, ARGV)\n \
             {body} \nend, flags={{'no-writes'}}}}"
        ),
    )
}

/// Asserts that Redis's reply (already compared with hozon's) is `expected`.
#[track_caller]
pub(crate) fn is(reply: &[u8], expected: &str) {
    assert!(
        reply == expected.as_bytes(),
        "Redis answered {} where the test expects {}",
        show(reply),
        show(expected.as_bytes())
    );
}

/// Asserts that Redis's reply (already compared) is an error containing
/// `part`.
#[track_caller]
pub(crate) fn err_has(reply: &[u8], part: &str) {
    let text = String::from_utf8_lossy(reply);
    assert!(
        text.starts_with('-') && text.contains(part),
        "Redis answered {} where the test expects an error with {part:?}",
        show(reply)
    );
}

/// FUNCTION LOAD `code` on both (optionally REPLACE), replies compared.
#[track_caller]
pub(crate) fn load(p: &mut Pair, code: &str) -> Vec<u8> {
    p.check(&["FUNCTION", "LOAD", code])
}

/// FUNCTION LOAD REPLACE `code` on both, replies compared.
#[track_caller]
fn load_replace(p: &mut Pair, code: &str) -> Vec<u8> {
    p.check(&["FUNCTION", "LOAD", "REPLACE", code])
}

/// Runs `body` on a fresh pair in RESP2, then again in RESP3 with no
/// libraries and no keys.
#[track_caller]
pub(crate) fn both_protocols(body: impl Fn(&mut Pair)) {
    let mut p = Pair::new();
    body(&mut p);
    p.resp3();
    p.check(&["FUNCTION", "FLUSH"]);
    p.check(&["FLUSHALL"]);
    body(&mut p);
}

#[test]
fn load_and_call_basics() {
    both_protocols(|p| {
        is(
            &load(p, &one("test", "test", "return 'hello'")),
            "$4\r\ntest\r\n",
        );
        is(&p.check(&["FCALL", "test", "0"]), "$5\r\nhello\r\n");
        // Unknown option, missing code, an existing library (names are
        // case-sensitive for libraries, function names are not).
        err_has(
            &p.check(&["FUNCTION", "LOAD", "foo", "bar", &one("t", "t", "return 1")]),
            "Unknown option given",
        );
        p.check(&["FUNCTION", "LOAD", "foo", "bar"]);
        p.check(&["FUNCTION", "LOAD"]);
        p.check(&["FUNCTION", "LOAD", "REPLACE"]);
        err_has(
            &load(p, &one("test", "test", "return 'hello1'")),
            "already exists",
        );
        err_has(
            &load(p, &one("test2", "TEST", "return 'hello1'")),
            "already exists",
        );
        err_has(
            &load_replace(p, &one("test", "test", "bad script")),
            "Error compiling function",
        );
        is(
            &load_replace(p, &one("test", "test", "return 'hello1'")),
            "$4\r\ntest\r\n",
        );
        is(&p.check(&["FCALL", "TEST", "0"]), "$6\r\nhello1\r\n");
        p.check(&["FCALL", "tEsT", "0"]);
        p.check(&["FCALL_RO", "test", "0"]);
        // A failed REPLACE keeps the old library.
        p.check(&["FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nerror('x')"]);
        is(&p.check(&["FCALL", "test", "0"]), "$6\r\nhello1\r\n");
        is(&p.check(&["FUNCTION", "DELETE", "test"]), "+OK\r\n");
        err_has(&p.check(&["FCALL", "test", "0"]), "Function not found");
        err_has(&p.check(&["FCALL_RO", "test", "0"]), "Function not found");
        err_has(
            &p.check(&["FUNCTION", "DELETE", "test"]),
            "Library not found",
        );
        load(p, &one("test", "test", "return 'again'"));
        p.check(&["FUNCTION", "DELETE", "TEST"]);
        // (Not `FCALL test\0x`: Redis compares names with strcasecmp, so
        // whether it finds `test` depends on the hash bucket `test\0x`
        // falls in, by its random seed.)
        p.check(&["FUNCTION", "DELETE", "test"]);
        p.check(&["FUNCTION", "DELETE"]);
        p.check(&["FUNCTION", "DELETE", "a", "b"]);
        err_has(
            &p.check(&["FUNCTION", "BAD_SUBCOMMAND"]),
            "unknown subcommand",
        );
        p.check(&["FUNCTION"]);
        // Libraries survive FLUSHALL and FLUSHDB.
        load(
            p,
            &one("test", "test", "return redis.call('set', 'x', '1')"),
        );
        p.check(&["FLUSHALL"]);
        p.check(&["FLUSHDB"]);
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FCALL", "test", "0"]);
        p.check(&["GET", "x"]);
        p.check(&["FUNCTION", "FLUSH"]);
    });
}

#[test]
fn load_metadata_and_name_errors() {
    both_protocols(|p| {
        for code in [
            "",
            "x",
            "#!",
            "#!lua",
            "#!lua\n",
            "#!lua name=",
            "#!lua name=\nredis.register_function('f', function() return 1 end)",
            "#! name=test\nredis.register_function('foo', function() return 1 end)",
            "#!bad_engine name=test\nredis.register_function('f', function() return 1 end)",
            "#!LUA name=test foo=bar\nredis.register_function('foo', function() return 1 end)",
            "#!lua name=foo name=bar\nredis.register_function('foo', function() return 1 end)",
            "#!lua foo\nredis.register_function('foo', function() return 1 end)",
            "#!lua name=bad\0foramat\nredis.register_function('f', function() return 1 end)",
            "#!lua name=bad\\0foramat\nredis.register_function('f', function() return 1 end)",
            "#!lua name=bad-name\nredis.register_function('f', function() return 1 end)",
            "#!lua name=a.b\nredis.register_function('f', function() return 1 end)",
            "#!lua name=\"foo\"\nredis.register_function('foo', function() return 1 end)",
            "#!lua name=test\n",
            "#!lua name=test\nreturn 1",
            "#!lua name=test\nlocal x = ",
            "#!lua name=test\nredis.register_function('f', function() return 1 end",
            "#!lua name=test\n\n\nerror('on line four')",
            "#!lua name=test\nerror({err='a table error'})",
            "#!lua name=test\nerror(12)",
            "#!lua name=test\nredis.register_function('f', function() return 1 end) error('after')",
            "#!Lua name=Mixed_Case_9\nredis.register_function('F_1', function() return 1 end)",
            "#!lua   name=spaces   \nredis.register_function('f2', function() return 1 end)",
        ] {
            let reply = p.check(&["FUNCTION", "LOAD", code]);
            if reply.starts_with(b"$") {
                let name = String::from_utf8_lossy(&reply);
                let name = name.lines().nth(1).expect("a name").to_string();
                p.check(&["FUNCTION", "LIST", "WITHCODE"]);
                p.check(&["FUNCTION", "DELETE", &name]);
            }
        }
        is(
            &load(
                p,
                "#! name=test\nredis.register_function('foo', function() return 1 end)",
            ),
            "-ERR Engine '' not found\r\n",
        );
        is(
            &load(
                p,
                "#!lua name=test foo=bar\nredis.register_function('foo', function() return 1 end)",
            ),
            "-ERR Invalid metadata value given: foo=bar\r\n",
        );
        is(
            &load(
                p,
                "#!lua\nredis.register_function('foo', function() return 1 end)",
            ),
            "-ERR Library name was not given\r\n",
        );
        is(
            &load(
                p,
                "#!lua name=foo name=bar\nredis.register_function('foo', function() return 1 end)",
            ),
            "-ERR Invalid metadata value, name argument was given multiple times\r\n",
        );
        err_has(
            &load(p, "#!lua name=lib\nreturn 1"),
            "No functions registered",
        );
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FUNCTION", "STATS"]);
    });
}

#[test]
fn registration_errors_positional_and_named() {
    both_protocols(|p| {
        // Redis's "usage and code sharing" library, then loads that fail
        // and must leave it as it was.
        let lib1 = lib(
            "lib1",
            "local function add1(a) return a + 1 end\n\
             redis.register_function('f1', function(keys, args) return add1(1) end)\n\
             redis.register_function('f2', function(keys, args) return add1(2) end)",
        );
        load(p, &lib1);
        for body in [
            "redis.register_function('f1', function() return 1 end)\n\
             redis.register_function('f2', 'not a function')",
            "redis.register_function('f1', function() return 1 end)",
            "redis.register_function('g', function() return 1 end)\n\
             redis.register_function('g', function() return 1 end)",
            "redis.register_function()",
            "redis.register_function('g')",
            "redis.register_function('g', function() return 1 end, {}, 'description', 'extra arg')",
            "redis.register_function('g', function() return 1 end, {})",
            "redis.register_function(nil, function() return 1 end)",
            "redis.register_function(12, function() return 1 end)",
            "redis.register_function('test\\0test', function() return 1 end)",
            "redis.register_function('bad-name', function() return 1 end)",
            "redis.register_function('', function() return 1 end)",
            "redis.register_function{function_name=function() return 1 end, \
             callback=function() return 'hello' end, description='some desc'}",
            "redis.register_function{function_name='g', callback='bad', description='some desc'}",
            "redis.register_function{function_name='g', callback=function() return 'hello' end, \
             description=function() return 1 end}",
            "redis.register_function{function_name='g', callback=function() return 'hello' end, \
             description='desc', some_unknown='unknown'}",
            "redis.register_function{callback=function() return 'hello' end, description='desc'}",
            "redis.register_function{function_name='g', description='desc'}",
            "redis.register_function{function_name='g', callback=function() return 1 end, \
             flags='bad flags type'}",
            "redis.register_function{function_name='g', callback=function() return 1 end, \
             flags={function() return 1 end}}",
            "redis.register_function{function_name='g', callback=function() return 1 end, \
             flags={'unknown'}}",
            "redis.register_function{function_name='g', callback=function() return 1 end, \
             flags={'no-writes', 'no-cluster', 'bogus'}}",
            "redis.register_function{}",
            "redis.register_function{'g', function() return 1 end}",
            "redis.register_function({function_name='g', callback=function() return 1 end}, 2)",
            "redis.register_function(function() return 1 end)",
        ] {
            let code = lib("lib2", body);
            p.check(&["FUNCTION", "LOAD", "REPLACE", &code]);
            p.check(&["FUNCTION", "LIST", "LIBRARYNAME", "lib2"]);
            // The replacing load of lib1 itself fails the same way, and
            // then leaves lib1 as it was.
            let replaced = p.check(&["FUNCTION", "LOAD", "REPLACE", &lib("lib1", body)]);
            if replaced.starts_with(b"-") {
                is(&p.check(&["FCALL", "f1", "0"]), ":2\r\n");
                is(&p.check(&["FCALL", "f2", "0"]), ":3\r\n");
            } else {
                p.check(&["FCALL", "f1", "0"]);
                p.check(&["FCALL", "f2", "0"]);
                load_replace(p, &lib1);
            }
            p.check(&["FUNCTION", "DELETE", "lib2"]);
        }
        is(
            &p.check(&["FUNCTION", "STATS"]),
            if is_resp3(p) {
                "%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n\
                 $15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n"
            } else {
                "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n\
                 $15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n"
            },
        );
        // Named arguments, each flag, descriptions (one function per
        // library, so LIST is in a fixed order).
        for (i, reg) in [
            "{function_name='f', callback=function() return 'hello' end, description='some desc'}",
            "{function_name='f', callback=function() return 1 end, flags={}}",
            "{function_name='f', callback=function() return 1 end, flags={'no-writes'}}",
            "{function_name='f', callback=function() return 1 end, flags={'allow-oom'}}",
            "{function_name='f', callback=function() return 1 end, flags={'allow-stale'}}",
            "{function_name='f', callback=function() return 1 end, flags={'no-cluster'}}",
            "{function_name='f', callback=function() return 1 end, \
             flags={'allow-cross-slot-keys'}}",
            "{function_name='f', callback=function() return 1 end, \
             flags={'no-writes', 'allow-oom', 'allow-stale', 'no-cluster', \
             'allow-cross-slot-keys'}, description=''}",
            "{function_name='f', callback=function() return 1 end, description='a\\nb'}",
            "('f', function() return 1 end)",
        ]
        .iter()
        .enumerate()
        {
            let name = format!("named{i}");
            let code = lib(&name, &format!("redis.register_function{reg}"));
            is(&load(p, &code), &format!("${}\r\n{name}\r\n", name.len()));
            p.check(&["FUNCTION", "LIST", "LIBRARYNAME", &name]);
            p.check(&["FUNCTION", "LIST", "LIBRARYNAME", &name, "WITHCODE"]);
            p.check(&["FCALL", "f", "0"]);
            p.check(&["FCALL_RO", "f", "0"]);
            p.check(&["FUNCTION", "DELETE", &name]);
        }
        p.check(&["FUNCTION", "FLUSH"]);
    });
}

/// Whether `p`'s Redis connection speaks RESP3 (asks HELLO).
fn is_resp3(p: &mut Pair) -> bool {
    p.h.call(&[b"HELLO"]);
    p.r.call(&[b"HELLO"]).starts_with(b"%")
}

#[test]
fn the_load_run_is_sandboxed() {
    both_protocols(|p| {
        for (body, part) in [
            ("return math.random()", "nonexistent global variable 'math'"),
            (
                "return redis.call('ping')",
                "nonexistent global variable 'call'",
            ),
            (
                "return redis.pcall('ping')",
                "nonexistent global variable 'pcall'",
            ),
            (
                "return redis.setresp(3)",
                "nonexistent global variable 'setresp'",
            ),
            (
                "return redis.set_repl(redis.REPL_NONE)",
                "nonexistent global variable 'set_repl'",
            ),
            (
                "mt = getmetatable(_G)",
                "nonexistent global variable 'getmetatable'",
            ),
            ("a = 1", "Attempt to modify a readonly table"),
            ("redis.x = 1", "Attempt to modify a readonly table"),
            ("local x = undefined_global", "nonexistent global variable"),
            ("redis.math.random()", "nonexistent global variable 'math'"),
            (
                "redis.redis.call('ping')",
                "nonexistent global variable 'redis'",
            ),
            (
                "local a = 1\nwhile 1 do a = a + 1 end",
                "FUNCTION LOAD timeout",
            ),
        ] {
            err_has(&load_replace(p, &lib("lib", body)), part);
        }
        // What the load run can see: only `redis` with register_function,
        // log and the version (no string, type, bit...); the callbacks see
        // the usual globals.
        for body in [
            "return string.len('x')",
            "return type(1)",
            "return bit.band(1, 1)",
            "return cjson.encode({1})",
            "return tostring(1)",
            "return pcall(error)",
            "return KEYS",
            "return redis.sha1hex('x')",
            "return redis.status_reply('x')",
            "return redis.error_reply('x')",
            "return _G",
        ] {
            load_replace(p, &lib("lib", body));
        }
        load(
            p,
            &lib(
                "visible",
                "redis.log(redis.LOG_NOTICE, 'loading')\n\
                 local v = redis.REDIS_VERSION .. ' ' .. redis.REDIS_VERSION_NUM\n\
                 redis.register_function('f', function() return {v, \
                 string.format('%d', bit.band(7, 3)) .. cjson.encode({1}), type(redis.call), \
                 type(redis.register_function), type(math), type(KEYS), type(redis.log)} end)",
            ),
        );
        p.check(&["FCALL", "f", "0"]);
        p.check(&["FUNCTION", "FLUSH"]);
    });
}

#[test]
fn fcall_arguments_and_flags() {
    both_protocols(|p| {
        load(p, &one("test", "test", "return {KEYS, ARGV}"));
        for args in [
            &["FCALL", "test", "bad_arg"][..],
            &["FCALL", "test", "10", "key1"],
            &["FCALL", "test", "-1", "key1"],
            &["FCALL", "test", "2", "a"],
            &["FCALL", "test", "1"],
            &["FCALL", "test", "0"],
            &["FCALL", "test", "00"],
            &["FCALL", "test", "+1", "a"],
            &["FCALL", "test", "-0"],
            &["FCALL", "test", "0x1", "a"],
            &["FCALL", "test", ""],
            &["FCALL", "test", "1.5"],
            &["FCALL", "test", " 1", "a"],
            &["FCALL", "test", "99999999999999999999", "a"],
            &["FCALL", "test", "2", "a", "b"],
            &["FCALL", "test", "1", "a", "b", "c"],
            &["FCALL", "test", "0", "a", "b"],
            &["FCALL_RO", "test", "bad_arg"],
            &["FCALL_RO", "test", "-1"],
            &["FCALL_RO", "test", "3", "a", "b"],
            &["FCALL", "nosuch", "bad"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "test"],
            &["FCALL"],
            &["FCALL_RO"],
        ] {
            p.check(args);
        }
        is(
            &p.check(&["FCALL", "test", "10", "key1"]),
            "-ERR Number of keys can't be greater than number of args\r\n",
        );
        is(
            &p.check(&["FCALL", "test", "-1", "key1"]),
            "-ERR Number of keys can't be negative\r\n",
        );
        err_has(
            &p.check(&["FCALL", "test", "bad_arg"]),
            "Bad number of keys provided",
        );
        // KEYS and ARGV.
        load_replace(
            p,
            &one("test", "test", "return redis.call('set', KEYS[1], ARGV[1])"),
        );
        is(&p.check(&["FCALL", "test", "1", "x", "foo"]), "+OK\r\n");
        is(&p.check(&["GET", "x"]), "$3\r\nfoo\r\n");
        // A write in FCALL_RO; no-writes functions.
        err_has(
            &p.check(&["FCALL_RO", "test", "1", "x", "bar"]),
            "Can not execute a script with write flag using *_ro command",
        );
        load_replace(
            p,
            &no_writes("test", "test", "return redis.call('set', 'x', '1')"),
        );
        err_has(
            &p.check(&["FCALL_RO", "test", "0"]),
            "Write commands are not allowed from read-only scripts",
        );
        err_has(
            &p.check(&["FCALL", "test", "0"]),
            "Write commands are not allowed from read-only scripts",
        );
        load_replace(
            p,
            &no_writes("test", "test", "return redis.call('get', 'x')"),
        );
        p.check(&["SET", "x", "1"]);
        is(&p.check(&["FCALL_RO", "test", "0"]), "$1\r\n1\r\n");
        is(&p.check(&["FCALL", "test", "0"]), "$1\r\n1\r\n");
        // A no-writes function that calls a write through pcall.
        load_replace(
            p,
            &no_writes("test", "test", "return redis.pcall('set', 'x', '1')"),
        );
        p.check(&["FCALL_RO", "test", "0"]);
        // COMMAND GETKEYS.
        for cmd in ["FCALL", "FCALL_RO"] {
            is(
                &p.check(&["COMMAND", "GETKEYS", cmd, "test", "1", "x", "foo"]),
                "*1\r\n$1\r\nx\r\n",
            );
            p.check(&["COMMAND", "GETKEYS", cmd, "test", "2", "x", "y", "z"]);
            p.check(&["COMMAND", "GETKEYS", cmd, "test", "0", "x"]);
            p.check(&["COMMAND", "GETKEYS", cmd, "test", "5", "x"]);
            p.check(&["COMMAND", "GETKEYS", cmd, "test", "-1", "x"]);
        }
        p.check(&["COMMAND", "INFO", "FCALL", "FCALL_RO"]);
        // In a transaction.
        load_replace(
            p,
            &one("test", "test", "return redis.call('incr', KEYS[1])"),
        );
        p.script(
            "MULTI
             FCALL test 1 n
             FCALL_RO test 1 n
             FCALL nosuch 0
             FCALL test 1 n
             EXEC
             GET n
             MULTI
             FUNCTION DELETE test
             FCALL test 1 n
             FUNCTION FLUSH
             FUNCTION LIST
             EXEC",
        );
        // FUNCTION LOAD queued in a transaction, then called in it.
        p.check(&["MULTI"]);
        p.check(&[
            "FUNCTION",
            "LOAD",
            &one("tx", "tx", "return redis.call('incr', KEYS[1])"),
        ]);
        p.check(&["FUNCTION", "LOAD", "#!lua name=tx\nreturn 1"]);
        p.check(&["FCALL", "tx", "1", "n"]);
        p.check(&["EXEC"]);
        p.check(&["EVAL", "return redis.call('fcall', 'tx', 1, 'n')", "0"]);
        p.check(&["EVAL", "return redis.call('function', 'flush')", "0"]);
        p.check(&["FUNCTION", "FLUSH"]);
    });
}

#[test]
fn fcall_returns_each_lua_type_and_runtime_errors() {
    both_protocols(|p| {
        let bodies = [
            "return nil",
            "return false",
            "return true",
            "return 42",
            "return -3.9",
            "return 'str'",
            "return ''",
            "return {1, 'two', {3, 'four'}, false, true}",
            "return {1, 2, nil, 4}",
            "return {}",
            "return {ok='fine'}",
            "return {err='My Error'}",
            "return {err='-NOPREFIX x'}",
            "return redis.status_reply('STATUS')",
            "return redis.error_reply('ERR custom')",
            "return redis.error_reply('custom without prefix')",
            "return {double=3.5}",
            "return {map={a=1}}",
            "return {set={a=true}}",
            "return {big_number='123456789012345678901234567890'}",
            "return redis.call('ping')",
            "return redis.pcall('nosuchcommand')",
            "return redis.pcall('incr', 'str')",
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "redis.setresp(3) return redis.call('smembers', 'one')",
            "redis.setresp(3) return {double=1.5}",
            "return redis.call('hgetall', 'h')",
            "return #KEYS + #ARGV",
            "return redis.sha1hex('x')",
            "return type(bit) .. type(cjson) .. type(struct) .. type(cmsgpack)",
            "return redis.REDIS_VERSION",
            "redis.set_repl(redis.REPL_ALL) return redis.call('set', 'r', '1')",
            "redis.set_repl(99)",
            "return redis.replicate_commands()",
            "return redis.breakpoint()",
            "return redis.debug('x')",
            "return redis.acl_check_cmd('set', 'x', 'y')",
            "return redis.acl_check_cmd('nosuch')",
            "redis.setresp(4)",
            "redis.setresp(2) return redis.call('hgetall', 'h')",
            "return redis.log(redis.LOG_WARNING, 'from a function')",
            "return redis.sha1hex()",
            "return {KEYS[1], ARGV[1], KEYS[2], ARGV[2]}",
            "KEYS[1] = 'changed' return KEYS[1]",
            "return math.random(10)",
            "return tostring(math.huge)",
            "return {1.5, -0.0, 1e300}",
            "return string.rep('x', 3)",
            "return cmsgpack.unpack(cmsgpack.pack({1, 2}))",
            "return redis.call('time')[1] ~= nil",
            // Runtime errors, with the line they happen on.
            "error('boom')",
            "\nlocal x = nil\nreturn x.field",
            "return redis.call('incr', 'str')",
            "return redis.call('nosuchcommand')",
            "return redis.call()",
            "error({err='ERR table error'})",
            "error(7)",
            "return undefined_global",
            "global_write = 1",
            "redis.x = 1",
            "return redis.register_function('g', function() return 1 end)",
            "mt = getmetatable(_G) mt.__index['redis'] = function() return 1 end",
            "return loadstring('return 1')()",
            "redis.call('select', 1)",
            "return redis.call('eval', 'return 1', 0)",
            "return redis.call('fcall', 'test', 0)",
            "return redis.call('function', 'list')",
        ];
        p.check(&["HSET", "h", "f", "v"]);
        p.check(&["SADD", "one", "m"]);
        p.check(&["SET", "str", "abc"]);
        for body in bodies {
            load_replace(p, &one("test", "test", body));
            p.check(&["FCALL", "test", "1", "k", "a"]);
            p.check(&["FCALL_RO", "test", "0"]);
        }
        // EVAL and functions share one math.random sequence, which a new
        // library or FUNCTION FLUSH does not restart.
        load_replace(p, &one("test", "test", "return math.random(1000)"));
        for _ in 0..2 {
            p.check(&["FCALL", "test", "0"]);
            p.check(&["EVAL", "return math.random(1000)", "0"]);
            p.check(&["FUNCTION", "FLUSH"]);
            load(p, &one("test", "test", "return math.random(1000)"));
            p.check(&["FCALL_RO", "test", "0"]);
            p.check(&["SCRIPT", "FLUSH"]);
        }
        // Redis's "register function inside a function".
        load_replace(
            p,
            &lib(
                "test",
                "redis.register_function(\n'f1',\nfunction(keys, args)\n\
                 redis.register_function('f2', function(key, args) return 2 end)\n\
                 return 1\nend\n)",
            ),
        );
        err_has(
            &p.check(&["FCALL", "f1", "0"]),
            "attempt to call field 'register_function' (a nil value)",
        );
        p.check(&["FUNCTION", "FLUSH"]);
        // Redis's "malicious access test": the registration API kept in a
        // local cannot be used at run time, nor the run-time API at load.
        load_replace(
            p,
            &lib(
                "lib1",
                "local lib = redis\n\
                 lib.register_function('f1', function ()\n\
                 lib.redis = redis\n lib.math = math\n return {ok='OK'}\n end)\n\
                 lib.register_function('f2', function ()\n\
                 lib.register_function('f1', function ()\n\
                 lib.redis = redis\n lib.math = math\n return {ok='OK'}\n end)\n end)",
            ),
        );
        err_has(
            &p.check(&["FCALL", "f1", "0"]),
            "Attempt to modify a readonly table",
        );
        err_has(
            &load(p, &lib("lib2", "redis.math.random()")),
            "Script attempted to access nonexistent global variable 'math'",
        );
        err_has(
            &load(p, &lib("lib2", "redis.redis.call('ping')")),
            "Script attempted to access nonexistent global variable 'redis'",
        );
        err_has(
            &p.check(&["FCALL", "f2", "0"]),
            "can only be called on FUNCTION LOAD command",
        );
        // "trick global protection 1".
        load(
            p,
            &lib(
                "test1",
                "redis.register_function('t1', function()\n\
                 mt = getmetatable(_G)\n original_globals = mt.__index\n\
                 original_globals['redis'] = function() return 1 end\n end)",
            ),
        );
        err_has(
            &p.check(&["FCALL", "t1", "0"]),
            "Attempt to modify a readonly table",
        );
        // Code shared between functions of a library, default globals.
        load_replace(
            p,
            &lib(
                "lib1",
                "local function ping() return redis.call('ping') end\n\
                 redis.register_function('f1', function(keys, args) return ping() end)",
            ),
        );
        is(&p.check(&["FCALL", "f1", "0"]), "+PONG\r\n");
        p.check(&["FUNCTION", "FLUSH"]);
    });
}

#[test]
fn function_list_flush_and_stats() {
    both_protocols(|p| {
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FUNCTION", "LIST", "WITHCODE"]);
        load(
            p,
            &lib(
                "library1",
                "redis.register_function('f6', function(keys, args) return 7 end)",
            ),
        );
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FUNCTION", "LIST", "WITHCODE"]);
        p.check(&["FUNCTION", "LIST", "withcode"]);
        load(
            p,
            &lib(
                "lib1",
                "redis.register_function('f7', function(keys, args) return 7 end)",
            ),
        );
        for args in [
            &["FUNCTION", "LIST", "LIBRARYNAME", "library*"][..],
            &["FUNCTION", "LIST", "libraryname", "library*", "WITHCODE"],
            &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "library*"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "lib1"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "LIB1"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "l?b1"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "[l]ib1"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "lib1\0x"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "lib1\0"],
            &["FUNCTION", "LIST", "bad_argument"],
            &["FUNCTION", "LIST", "LIBRARYNAME"],
            &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
            &[
                "FUNCTION",
                "LIST",
                "WITHCODE",
                "LIBRARYNAME",
                "foo",
                "LIBRARYNAME",
                "foo",
            ],
            &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME"],
        ] {
            p.check(args);
        }
        p.check_unordered(&["FUNCTION", "LIST", "LIBRARYNAME", "LIB*"]);
        p.check(&["FUNCTION", "STATS"]);
        p.check(&["FUNCTION", "STATS", "extra"]);
        // Several libraries, one of two functions: STATS counts.
        load(
            p,
            &lib(
                "test1",
                "redis.register_function('f1', function() return 1 end)\n\
                 redis.register_function('f2', function() return 1 end)",
            ),
        );
        p.check(&["FUNCTION", "STATS"]);
        p.check(&["FUNCTION", "DELETE", "lib1"]);
        p.check(&["FUNCTION", "STATS"]);
        err_has(
            &load(
                p,
                &lib(
                    "test1",
                    "redis.register_function('f3', function() return 1 end)",
                ),
            ),
            "Library 'test1' already exists",
        );
        p.check(&["FUNCTION", "STATS"]);
        // FLUSH and its modes.
        is(&p.check(&["FUNCTION", "FLUSH"]), "+OK\r\n");
        p.check(&["FUNCTION", "LIST"]);
        p.check(&["FUNCTION", "STATS"]);
        for mode in ["ASYNC", "sync", "SYNC", "async"] {
            load(p, &one("test", "test", "return 1"));
            p.check(&["FUNCTION", "LIST"]);
            is(&p.check(&["FUNCTION", "FLUSH", mode]), "+OK\r\n");
            p.check(&["FUNCTION", "LIST"]);
            p.check(&["FCALL", "test", "0"]);
        }
        err_has(
            &p.check(&["FUNCTION", "FLUSH", "bad_arg"]),
            "only supports SYNC|ASYNC",
        );
        p.check(&["FUNCTION", "FLUSH", "sync", "extra_arg"]);
        p.check(&["FUNCTION", "HELP"]);
        p.check(&["FUNCTION", "help"]);
        p.check(&["FUNCTION", "HELP", "extra"]);
        is(
            &p.check(&["FUNCTION", "KILL"]),
            "-NOTBUSY No scripts in execution right now.\r\n",
        );
        p.check(&["FUNCTION", "KILL", "extra"]);
        p.check(&["FUNCTION", "DUMP", "extra"]);
    });
}
