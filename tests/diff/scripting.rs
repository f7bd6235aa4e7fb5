//! Differential tests for Lua scripting: EVAL / EVALSHA / EVAL_RO /
//! EVALSHA_RO and SCRIPT, checked byte for byte against Redis 7.0 in RESP2
//! and RESP3: argument errors, the Lua <-> Redis reply conversions (both
//! ways, RESP3 included), error replies and their `script: <sha>, on
//! @user_script:N.` suffix, the sandbox, the deterministic PRNG, the
//! `redis.*` helpers, the bundled libraries (cjson, bit, struct, cmsgpack)
//! and how scripts interact with transactions, databases and the keyspace.
//!
//! Many tests also assert what Redis itself answered, so each documents the
//! behaviour it relies on (exact error strings in particular).

use crate::harness::{show, Pair};

/// The SHA1 of a script body, as Redis names it in error suffixes.
fn sha(script: &str) -> String {
    sha1_smol::Sha1::from(script).digest().to_string()
}

/// `cmd script numkeys keys... args...` sent to both servers; the raw
/// replies must be identical. Returns Redis's reply.
#[track_caller]
fn run(p: &mut Pair, cmd: &str, script: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    let numkeys = keys.len().to_string();
    let mut argv: Vec<&str> = vec![cmd, script, &numkeys];
    argv.extend_from_slice(keys);
    argv.extend_from_slice(args);
    p.check(&argv)
}

/// EVAL on both servers, replies compared.
#[track_caller]
fn eval(p: &mut Pair, script: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
    run(p, "EVAL", script, keys, args)
}

/// Asserts that Redis's raw reply is `expected` (documents what the test
/// relies on; the comparison with hozon has already been made).
#[track_caller]
fn assert_reply(reply: &[u8], expected: &str) {
    assert!(
        reply == expected.as_bytes(),
        "Redis answered {} where the test expects {}",
        show(reply),
        show(expected.as_bytes())
    );
}

/// EVAL with no keys or arguments; both replies compared, and Redis's must
/// be `expected`.
#[track_caller]
fn eval_is(p: &mut Pair, script: &str, expected: &str) {
    let reply = eval(p, script, &[], &[]);
    assert_reply(&reply, expected);
}

/// EVAL with no keys or arguments that fails with `message` raised on line
/// `line` of the script: Redis replies `-<message> script: <sha>, on
/// @user_script:<line>.`.
#[track_caller]
fn eval_err(p: &mut Pair, script: &str, message: &str, line: u32) {
    let reply = eval(p, script, &[], &[]);
    let expected = format!(
        "-{message} script: {}, on @user_script:{line}.\r\n",
        sha(script)
    );
    assert_reply(&reply, &expected);
}

/// A command on both servers whose Redis reply must be `expected`.
#[track_caller]
fn check_is(p: &mut Pair, args: &[&str], expected: &str) {
    let reply = p.check(args);
    assert_reply(&reply, expected);
}

/// Runs `body` on a fresh pair in RESP2, then again after HELLO 3 on a
/// flushed keyspace.
#[track_caller]
fn both_protocols(body: impl Fn(&mut Pair)) {
    let mut p = Pair::new();
    body(&mut p);
    p.resp3();
    p.check(&["FLUSHALL"]);
    body(&mut p);
}

// ---------------------------------------------------------------------
// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO basics and argument errors
// ---------------------------------------------------------------------

#[test]
fn eval_returns_values_and_sees_keys_and_argv() {
    let mut p = Pair::new();
    eval_is(&mut p, "return 'hello'", "$5\r\nhello\r\n");
    eval_is(
        &mut p,
        "return 'hello' --trailing comment",
        "$5\r\nhello\r\n",
    );
    let r = eval(
        &mut p,
        "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
        &["a{t}", "b{t}"],
        &["c{t}", "d{t}"],
    );
    assert_reply(
        &r,
        "*4\r\n$4\r\na{t}\r\n$4\r\nb{t}\r\n$4\r\nc{t}\r\n$4\r\nd{t}\r\n",
    );
    eval(
        &mut p,
        "return {KEYS, ARGV}",
        &["k1", "k2"],
        &["a1", "a2", "a3"],
    );
    eval(&mut p, "return #KEYS .. '/' .. #ARGV", &[], &[]);
    eval(&mut p, "return #KEYS .. '/' .. #ARGV", &[], &["x"]);
    eval(&mut p, "return #KEYS .. '/' .. #ARGV", &["x"], &[]);
    // Arguments are binary-safe both ways.
    p.check_bytes(&[
        b"EVAL",
        b"return {KEYS[1], ARGV[1], #ARGV[1]}",
        b"1",
        b"k\x00\xff",
        b"\r\n\x00",
    ]);
    // An empty script returns nil.
    eval_is(&mut p, "", "$-1\r\n");
    eval_is(&mut p, "  ", "$-1\r\n");
    p.script(
        "SET mykey myval
        EVAL \"return redis.call('get',KEYS[1])\" 1 mykey
        EVAL \"return redis.call('get',KEYS[1])\" 1 nokey
        EVAL \"return redis.call('get',KEYS[1])\" 1 mykey extra args
        EVAL \"return 'x'\" 00
        EVAL \"return 'x'\" +0",
    );
}

#[test]
fn eval_numkeys_errors() {
    let mut p = Pair::new();
    check_is(
        &mut p,
        &["EVAL", "return 1", "-1"],
        "-ERR Number of keys can't be negative\r\n",
    );
    check_is(
        &mut p,
        &["EVAL", "return 'hello'", "-12"],
        "-ERR Number of keys can't be negative\r\n",
    );
    check_is(
        &mut p,
        &["EVAL", "return 1", "2", "a"],
        "-ERR Number of keys can't be greater than number of args\r\n",
    );
    check_is(
        &mut p,
        &["EVAL", "return 1", "1"],
        "-ERR Number of keys can't be greater than number of args\r\n",
    );
    for bad in ["x", "1.5", " 1", "1 ", "0x1", "99999999999999999999", ""] {
        check_is(
            &mut p,
            &["EVAL", "return 1", bad, "a"],
            "-ERR value is not an integer or out of range\r\n",
        );
    }
    // The same checks apply to the other three commands; EVALSHA checks
    // numkeys before it looks the script up.
    for cmd in ["EVAL_RO", "EVALSHA", "EVALSHA_RO"] {
        p.check(&[cmd, "return 1", "-1"]);
        p.check(&[cmd, "return 1", "3", "a", "b"]);
        p.check(&[cmd, "return 1", "nope"]);
        p.check(&[cmd, "ffd632c7d33e571e9f24556ebed26c3479a87130", "-1"]);
        p.check(&[cmd, "ffd632c7d33e571e9f24556ebed26c3479a87130", "2", "a"]);
    }
}

#[test]
fn eval_arity_errors() {
    let mut p = Pair::new();
    check_is(
        &mut p,
        &["EVAL"],
        "-ERR wrong number of arguments for 'eval' command\r\n",
    );
    check_is(
        &mut p,
        &["EVAL", "return 1"],
        "-ERR wrong number of arguments for 'eval' command\r\n",
    );
    p.script(
        "EVALSHA
        EVALSHA ffd632c7d33e571e9f24556ebed26c3479a87130
        EVAL_RO
        EVAL_RO \"return 1\"
        EVALSHA_RO
        EVALSHA_RO ffd632c7d33e571e9f24556ebed26c3479a87130
        eval
        evalsha_ro x",
    );
}

#[test]
fn evalsha_runs_scripts_cached_by_eval_in_either_case() {
    let mut p = Pair::new();
    p.check(&["SET", "mykey", "myval"]);
    let script = "return redis.call('get',KEYS[1])";
    let digest = sha(script);
    assert_eq!(digest, "fd758d1589d044dd850a6f05d52f2eefd27f033f");
    // Not cached yet.
    check_is(
        &mut p,
        &["EVALSHA", &digest, "1", "mykey"],
        "-NOSCRIPT No matching script. Please use EVAL.\r\n",
    );
    eval(&mut p, script, &["mykey"], &[]);
    check_is(
        &mut p,
        &["EVALSHA", &digest, "1", "mykey"],
        "$5\r\nmyval\r\n",
    );
    let upper = digest.to_uppercase();
    check_is(
        &mut p,
        &["EVALSHA", &upper, "1", "mykey"],
        "$5\r\nmyval\r\n",
    );
    check_is(
        &mut p,
        &["EVALSHA_RO", &digest, "1", "mykey"],
        "$5\r\nmyval\r\n",
    );
    p.check(&["EVALSHA_RO", &upper, "1", "mykey"]);
    // A mixed-case digest works too.
    let mixed: String = digest
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i % 2 == 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    p.check(&["EVALSHA", &mixed, "1", "mykey"]);
    p.check(&["SCRIPT", "EXISTS", &digest, &upper, &mixed]);
}

#[test]
fn evalsha_unknown_or_malformed_digests_are_noscript() {
    let mut p = Pair::new();
    for digest in [
        "ffd632c7d33e571e9f24556ebed26c3479a87130",
        "NotValidShaSUM",
        "",
        "abc",
        "ffd632c7d33e571e9f24556ebed26c3479a8713",
        "ffd632c7d33e571e9f24556ebed26c3479a871300",
        "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
        "return 1",
    ] {
        check_is(
            &mut p,
            &["EVALSHA", digest, "0"],
            "-NOSCRIPT No matching script. Please use EVAL.\r\n",
        );
        p.check(&["EVALSHA_RO", digest, "0"]);
    }
    // A script's 41-character prefix is not its digest.
    eval(&mut p, "return 'x'", &[], &[]);
    let long = format!("{}0", sha("return 'x'"));
    p.check(&["EVALSHA", &long, "0"]);
    p.check(&["EVALSHA", &sha("return 'x'")[..39], "0"]);
}

#[test]
fn eval_ro_runs_read_only_scripts_and_rejects_writes() {
    let mut p = Pair::new();
    p.check(&["SET", "foo", "bar"]);
    let r = run(
        &mut p,
        "EVAL_RO",
        "return redis.call('get', KEYS[1]);",
        &["foo"],
        &[],
    );
    assert_reply(&r, "$3\r\nbar\r\n");
    let script = "redis.call('del', KEYS[1]);";
    let r = run(&mut p, "EVAL_RO", script, &["foo"], &[]);
    assert_reply(
        &r,
        &format!(
            "-ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.\r\n",
            sha(script)
        ),
    );
    p.check(&["GET", "foo"]);
    // redis.pcall returns the error as a table.
    let r = run(
        &mut p,
        "EVAL_RO",
        "local t = redis.pcall('set','x','y'); return t['err']",
        &["x"],
        &[],
    );
    assert_reply(
        &r,
        "$58\r\nERR Write commands are not allowed from read-only scripts.\r\n",
    );
    run(
        &mut p,
        "EVAL_RO",
        "return redis.pcall('set','x','y')",
        &["x"],
        &[],
    );
    p.check(&["EXISTS", "x"]);
    // Read-only commands of every kind are fine.
    p.check(&["RPUSH", "l", "a", "b"]);
    run(
        &mut p,
        "EVAL_RO",
        "return {redis.call('lrange','l',0,-1), redis.call('exists','l'), redis.call('type','l')}",
        &["l"],
        &[],
    );
    // EVALSHA_RO of a cached writing script fails the same way.
    let writer = "return redis.call('incr', KEYS[1])";
    eval(&mut p, writer, &["n"], &[]);
    p.check(&["EVALSHA_RO", &sha(writer), "1", "n"]);
    p.check(&["EVALSHA", &sha(writer), "1", "n"]);
    p.check(&["GET", "n"]);
}

// ---------------------------------------------------------------------
// SCRIPT
// ---------------------------------------------------------------------

#[test]
fn script_load_exists_and_flush() {
    let mut p = Pair::new();
    check_is(
        &mut p,
        &["SCRIPT", "LOAD", "return 'loaded'"],
        "$40\r\nb534286061d4b9e4026607613b95c06c06015ae8\r\n",
    );
    check_is(
        &mut p,
        &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
        "$6\r\nloaded\r\n",
    );
    // Loading twice is fine and answers the same digest.
    p.check(&["SCRIPT", "LOAD", "return 'loaded'"]);
    p.check(&["SCRIPT", "load", ""]);
    eval(&mut p, "return 1+1", &[], &[]);
    check_is(
        &mut p,
        &[
            "SCRIPT",
            "EXISTS",
            "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9",
            "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bda",
            "A27E7E8A43702B7046D4F6A7CCF5B60CEF6B9BD9",
            "short",
        ],
        "*4\r\n:1\r\n:0\r\n:1\r\n:0\r\n",
    );
    check_is(&mut p, &["SCRIPT", "FLUSH"], "+OK\r\n");
    p.check(&[
        "SCRIPT",
        "EXISTS",
        "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9",
    ]);
    p.check(&["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"]);
    // A compile error is reported by SCRIPT LOAD and nothing is cached.
    check_is(
        &mut p,
        &["SCRIPT", "LOAD", "return +"],
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n",
    );
    p.check(&["SCRIPT", "EXISTS", &sha("return +")]);
    // Many scripts, then flush them all.
    for j in 0..20 {
        p.check(&["SCRIPT", "LOAD", &format!("return {j}")]);
    }
    p.check(&["SCRIPT", "EXISTS", &sha("return 0"), &sha("return 19")]);
    check_is(&mut p, &["SCRIPT", "FLUSH", "ASYNC"], "+OK\r\n");
    p.check(&["SCRIPT", "EXISTS", &sha("return 0"), &sha("return 19")]);
}

#[test]
fn script_flush_options() {
    let mut p = Pair::new();
    p.script(
        "SCRIPT FLUSH
        SCRIPT FLUSH SYNC
        SCRIPT FLUSH ASYNC
        SCRIPT FLUSH sync
        SCRIPT FLUSH async",
    );
    for bad in [&["BAD"][..], &["SYNC", "ASYNC"], &["SYNC", "SYNC"], &[""]] {
        let mut argv = vec!["SCRIPT", "FLUSH"];
        argv.extend_from_slice(bad);
        check_is(
            &mut p,
            &argv,
            "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n",
        );
    }
}

#[test]
fn script_subcommand_errors_help_and_kill() {
    let mut p = Pair::new();
    check_is(
        &mut p,
        &["SCRIPT", "KILL"],
        "-NOTBUSY No scripts in execution right now.\r\n",
    );
    check_is(
        &mut p,
        &["SCRIPT", "KILL", "x"],
        "-ERR wrong number of arguments for 'script|kill' command\r\n",
    );
    check_is(
        &mut p,
        &["SCRIPT", "FOO"],
        "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP.\r\n",
    );
    check_is(
        &mut p,
        &["SCRIPT"],
        "-ERR wrong number of arguments for 'script' command\r\n",
    );
    p.script(
        "SCRIPT foo bar
        SCRIPT LOAD
        SCRIPT LOAD a b
        SCRIPT EXISTS
        SCRIPT HELP
        SCRIPT help
        SCRIPT HELP extra",
    );
    // The help text, line by line.
    let help = p.check(&["SCRIPT", "HELP"]);
    assert!(help.starts_with(
        b"*17\r\n+SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    ));
    p.resp3();
    p.script(
        "SCRIPT HELP
        SCRIPT EXISTS a b
        SCRIPT KILL",
    );
}

// ---------------------------------------------------------------------
// Lua -> Redis reply conversions
// ---------------------------------------------------------------------

#[test]
fn lua_numbers_become_truncated_integers() {
    both_protocols(|p| {
        eval_is(p, "return 100.5", ":100\r\n");
        eval_is(p, "return 3.99", ":3\r\n");
        eval_is(p, "return -3.99", ":-3\r\n");
        eval_is(p, "return -0.5", ":0\r\n");
        eval_is(p, "return 0", ":0\r\n");
        eval_is(p, "return 9007199254740993", ":9007199254740992\r\n");
        eval_is(p, "return 2^63 - 1024", ":9223372036854774784\r\n");
        eval_is(p, "return -2^63", ":-9223372036854775808\r\n");
        // Out of range, infinite and NaN: the C cast gives LLONG_MIN on x86-64.
        eval_is(p, "return 1e20", ":-9223372036854775808\r\n");
        eval_is(p, "return -1e20", ":-9223372036854775808\r\n");
        eval_is(p, "return 1/0", ":-9223372036854775808\r\n");
        eval_is(p, "return 0/0", ":-9223372036854775808\r\n");
        eval(p, "return {1, 2.9, -3.99, 1e3, 0x10}", &[], &[]);
        eval(p, "return tonumber(ARGV[1])", &[], &["12.7"]);
    });
}

#[test]
fn lua_booleans_nil_and_strings() {
    both_protocols(|p| {
        eval(p, "return true", &[], &[]);
        eval(p, "return false", &[], &[]);
        eval(p, "return nil", &[], &[]);
        eval(p, "return", &[], &[]);
        eval(p, "return {1, true, false, 'x'}", &[], &[]);
        eval(p, "return {true, false}", &[], &[]);
        eval(p, "return 'hello world'", &[], &[]);
        eval(p, "return ''", &[], &[]);
        eval(p, r"return 'a\0b\255\r\n'", &[], &[]);
        eval(p, "return string.char(0, 1, 2, 254, 255)", &[], &[]);
        eval(p, "return string.rep('x', 70000)", &[], &[]);
        // Functions, and anything else without a conversion, are nil.
        eval(p, "return function() end", &[], &[]);
        eval(p, "return {1, function() end, 3}", &[], &[]);
        eval(p, "return coroutine.create(function() end)", &[], &[]);
    });
    let mut p = Pair::new();
    eval_is(&mut p, "return true", ":1\r\n");
    eval_is(&mut p, "return false", "$-1\r\n");
    eval_is(
        &mut p,
        "return {1,2.9,-3.99,true,false,'a'}",
        "*6\r\n:1\r\n:2\r\n:-3\r\n:1\r\n$-1\r\n$1\r\na\r\n",
    );
    p.resp3();
    // A RESP3 client still gets 1 for true (the script speaks RESP2), but
    // false is the RESP3 null.
    eval_is(&mut p, "return true", ":1\r\n");
    eval_is(&mut p, "return false", "_\r\n");
    eval_is(&mut p, "return nil", "_\r\n");
}

#[test]
fn lua_tables_become_arrays_up_to_the_first_nil() {
    both_protocols(|p| {
        eval_is(
            p,
            "return {1,2,3,'ciao',{1,2}}",
            "*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n",
        );
        eval_is(p, "return {1,2,nil,4}", "*2\r\n:1\r\n:2\r\n");
        eval_is(p, "return {nil,2}", "*0\r\n");
        eval_is(p, "return {}", "*0\r\n");
        // The hash part is ignored.
        eval_is(p, "return {1,2,x=3}", "*2\r\n:1\r\n:2\r\n");
        eval_is(p, "return {x=3}", "*0\r\n");
        eval_is(
            p,
            "return {[1]='a', [2]='b', [4]='d'}",
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        );
        eval_is(p, "return {[2]='b'}", "*0\r\n");
        eval_is(p, "return {[1.5]='x', [1]='y'}", "*1\r\n$1\r\ny\r\n");
        eval_is(
            p,
            "return {{1,{2,{3}}},'x'}",
            "*2\r\n*2\r\n:1\r\n*2\r\n:2\r\n*1\r\n:3\r\n$1\r\nx\r\n",
        );
        eval_is(p, "return {1,{},3}", "*3\r\n:1\r\n*0\r\n:3\r\n");
        // _G has no array part; metatables are not consulted (rawget).
        eval_is(p, "return _G", "*0\r\n");
        eval_is(
            p,
            "local a = {}; setmetatable(a,{__index=function() foo() end}) return a",
            "*0\r\n",
        );
        eval(
            p,
            "local a = {}; setmetatable(a,{__index=function() redis.call('set', 'x', '1') end}) return a",
            &[],
            &[],
        );
        p.check(&["GET", "x"]);
        // A table built with table.insert and a large one.
        eval(
            p,
            "local t = {}; for i = 1, 1000 do table.insert(t, i * 3) end; return t",
            &[],
            &[],
        );
    });
}

#[test]
fn lua_status_and_error_tables() {
    both_protocols(|p| {
        eval_is(p, "return {ok='fine'}", "+fine\r\n");
        eval_is(p, "return {ok=''}", "+\r\n");
        eval_is(
            p,
            "return {err='ERR this is an error'}",
            "-ERR this is an error\r\n",
        );
        // No error code is added to a table's message...
        eval_is(p, "return {err='no code here'}", "-no code here\r\n");
        eval_is(p, "return {err=''}", "-\r\n");
        // ...and a leading '-' is kept.
        eval_is(p, "return {err='-ERR x'}", "--ERR x\r\n");
        // err wins over ok; newlines become spaces.
        eval_is(p, "return {err='E', ok='o'}", "-E\r\n");
        eval_is(p, r"return {ok='a\r\nb'}", "+a  b\r\n");
        eval_is(p, r"return {err='a\r\nb'}", "-a  b\r\n");
        // Non-string ok/err fields: a plain (empty) array. A number is a string to Lua.
        eval_is(p, "return {ok={}}", "*0\r\n");
        eval_is(p, "return {err=true}", "*0\r\n");
        eval(p, "return {err=5}", &[], &[]);
        eval(p, "return {ok=5}", &[], &[]);
        // Extra fields of an error table are ignored.
        eval_is(p, "return {err='E x', source='s', line=4}", "-E x\r\n");
        // Nested status and error replies inside arrays.
        eval_is(
            p,
            "return {1, {ok='fine'}, {err='ERR inner'}, 'x'}",
            "*4\r\n:1\r\n+fine\r\n-ERR inner\r\n$1\r\nx\r\n",
        );
    });
}

#[test]
fn redis_error_reply_and_status_reply_helpers() {
    both_protocols(|p| {
        eval_is(
            p,
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "-MY_ERR_CODE custom msg\r\n",
        );
        eval_is(p, "return redis.error_reply('no code')", "-no code\r\n");
        eval_is(p, "return redis.error_reply('-ERR x')", "-ERR x\r\n");
        eval_is(p, "return redis.error_reply('-NOCODE')", "-ERR NOCODE\r\n");
        eval_is(p, "return redis.error_reply('')", "-ERR \r\n");
        eval_is(p, r"return redis.error_reply('ERR a\r\n')", "-ERR a\r\n");
        eval_is(
            p,
            "return redis.status_reply('MY_OK_CODE custom msg')",
            "+MY_OK_CODE custom msg\r\n",
        );
        eval(p, "return redis.status_reply('')", &[], &[]);
        // The helpers return plain tables.
        eval(
            p,
            "local e = redis.error_reply('ERR x'); local s = redis.status_reply('OK'); return {e.err, s.ok, type(e)}",
            &[],
            &[],
        );
        eval(p, "return redis.error_reply('X y').err", &[], &[]);
        // Wrong arguments: the helpers return (not raise) an error table.
        for script in [
            "return redis.error_reply()",
            "return redis.error_reply(1)",
            "return redis.error_reply('a', 'b')",
            "return redis.error_reply({})",
            "return redis.status_reply()",
            "return redis.status_reply({})",
            "return redis.status_reply(1)",
            "return redis.status_reply('a','b')",
        ] {
            eval_is(p, script, "-ERR wrong number or type of arguments\r\n");
        }
    });
}

// ---------------------------------------------------------------------
// Redis -> Lua conversions
// ---------------------------------------------------------------------

#[test]
fn redis_integer_bulk_and_null_replies_in_lua() {
    both_protocols(|p| {
        p.check(&["SET", "x", "0"]);
        let r = eval(
            p,
            "local foo = redis.pcall('incr',KEYS[1]); return {type(foo),foo}",
            &["x"],
            &[],
        );
        assert_reply(&r, "*2\r\n$6\r\nnumber\r\n:1\r\n");
        p.check(&["SET", "mykey", "myval"]);
        let r = eval(
            p,
            "local foo = redis.pcall('get',KEYS[1]); return {type(foo),foo}",
            &["mykey"],
            &[],
        );
        assert_reply(&r, "*2\r\n$6\r\nstring\r\n$5\r\nmyval\r\n");
        let r = eval(
            p,
            "local foo = redis.pcall('get',KEYS[1]); return {type(foo),foo == false}",
            &["nokey"],
            &[],
        );
        assert_reply(&r, "*2\r\n$7\r\nboolean\r\n:1\r\n");
        // A null bulk returned as is.
        eval(p, "return redis.call('get','nokey')", &[], &[]);
        // Binary values survive the round trip.
        p.check_bytes(&[b"SET", b"bin", b"a\x00b\r\n\xff"]);
        eval(
            p,
            "local v = redis.call('get','bin'); return {v, #v}",
            &[],
            &[],
        );
        // Precision: integers and numeric strings (issue #1118).
        eval(
            p,
            "redis.call('set','foo',9007199254740991); return redis.call('get','foo')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('set','key','12039611435714932082'); return redis.call('get','key')",
            &[],
            &[],
        );
        eval(
            p,
            "return redis.call('incrby','big', 9223372036854775807)",
            &[],
            &[],
        );
        eval(
            p,
            "local n = redis.call('get', 'big'); return {n, type(n)}",
            &[],
            &[],
        );
        // A float argument is formatted by Lua (%.14g).
        eval(
            p,
            "redis.call('set','f',3.5); return redis.call('get','f')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('set','f',1e20); return redis.call('get','f')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('set','f',0.1); return redis.call('get','f')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('set','f',-0); return redis.call('get','f')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('set','f',1/3); return redis.call('get','f')",
            &[],
            &[],
        );
    });
}

#[test]
fn redis_array_replies_in_lua() {
    both_protocols(|p| {
        p.check(&["RPUSH", "mylist", "a", "b", "c"]);
        let r = eval(
            p,
            "local foo = redis.pcall('lrange',KEYS[1],0,-1); return {type(foo),foo[1],foo[2],foo[3],# foo}",
            &["mylist"],
            &[],
        );
        assert_reply(
            &r,
            "*5\r\n$5\r\ntable\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n:3\r\n",
        );
        // Nested arrays (stream entries) and arrays with null elements.
        p.check(&["XADD", "s", "1-1", "f", "v", "g", "w"]);
        p.check(&["XADD", "s", "2-1", "f", "v2"]);
        eval(p, "return redis.call('xrange','s','-','+')", &[], &[]);
        eval(
            p,
            "local t = redis.call('xrange','s','-','+'); return {type(t), #t, t[1][1], t[1][2][3], t[2][2][2]}",
            &[],
            &[],
        );
        p.check(&["SET", "k1", "v1"]);
        eval(p, "return redis.call('mget','k1','nokey','k1')", &[], &[]);
        eval(
            p,
            "local t = redis.call('mget','nokey','k1'); return {type(t[1]), tostring(t[1]), t[2]}",
            &[],
            &[],
        );
        // A null array (LPOP with a count on a missing key) becomes false.
        let r = eval(
            p,
            "local t = redis.call('lpop','nolist',2); return {type(t), tostring(t)}",
            &[],
            &[],
        );
        assert_reply(&r, "*2\r\n$7\r\nboolean\r\n$5\r\nfalse\r\n");
        eval(p, "return redis.call('lpop','nolist',2)", &[], &[]);
        // Empty arrays.
        eval(
            p,
            "local t = redis.call('lrange','nolist',0,-1); return {type(t), #t}",
            &[],
            &[],
        );
        eval(p, "return redis.call('keys','nomatch*')", &[], &[]);
        // Many arguments through unpack (issue #1764) and a big reply.
        let r = eval(
            p,
            "local x = {}; for i=1,100 do table.insert(x,i) end; redis.call('del','ml'); \
             redis.call('rpush','ml',unpack(x)); return redis.call('lrange','ml',0,-1)",
            &["ml"],
            &[],
        );
        assert!(r.starts_with(b"*100\r\n$1\r\n1\r\n$1\r\n2\r\n"));
        let r = eval(
            p,
            "local a = {}; for i=1,7999 do a[i] = 1 end; return redis.call('lpush', 'l7999', unpack(a))",
            &[],
            &[],
        );
        assert_reply(&r, ":7999\r\n");
    });
}

#[test]
fn redis_status_and_error_replies_in_lua() {
    both_protocols(|p| {
        let r = eval(
            p,
            "local foo = redis.pcall('set',KEYS[1],'myval'); return {type(foo),foo['ok']}",
            &["mykey"],
            &[],
        );
        assert_reply(&r, "*2\r\n$5\r\ntable\r\n$2\r\nOK\r\n");
        let r = eval(
            p,
            "local foo = redis.pcall('incr',KEYS[1]); return {type(foo),foo['err']}",
            &["mykey"],
            &[],
        );
        assert_reply(
            &r,
            "*2\r\n$5\r\ntable\r\n$43\r\nERR value is not an integer or out of range\r\n",
        );
        // Returned as is, they are status and error replies again (no suffix).
        eval_is(p, "return redis.call('ping')", "+PONG\r\n");
        eval_is(p, "return redis.call('set','a','b')", "+OK\r\n");
        eval(p, "return redis.call('type','a')", &[], &[]);
        eval(
            p,
            "local t = redis.call('ping'); return {type(t), t.ok}",
            &[],
            &[],
        );
        eval_is(
            p,
            "return redis.pcall('incr','a')",
            "-ERR value is not an integer or out of range\r\n",
        );
        eval_is(
            p,
            "return redis.pcall('nosuch')",
            "-ERR Unknown Redis command called from script\r\n",
        );
        eval_is(
            p,
            "local t = redis.pcall('nosuch'); return t.err",
            "$44\r\nERR Unknown Redis command called from script\r\n",
        );
        eval_is(
            p,
            "return redis.pcall('set','a')",
            "-ERR Wrong number of args calling Redis command from script\r\n",
        );
        eval(p, "return redis.pcall('lpush','a','x')", &[], &[]);
        eval(p, "return redis.pcall('select', 99)", &[], &[]);
        eval(
            p,
            "local t = redis.pcall('select',99); return t['err']",
            &[],
            &[],
        );
        // An error inside an array reply of pcall'd commands.
        eval(
            p,
            "return {redis.pcall('incr','a'), redis.pcall('get','a')}",
            &[],
            &[],
        );
    });
}

#[test]
fn round_trips_of_collection_replies() {
    both_protocols(|p| {
        p.check(&["HSET", "h", "f1", "v1", "f2", "v2", "f3", "3"]);
        let r = eval(p, "return redis.call('HGETALL',KEYS[1])", &["h"], &[]);
        assert_reply(
            &r,
            "*6\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$2\r\nf3\r\n$1\r\n3\r\n",
        );
        eval(
            p,
            "return redis.call('HMGET',KEYS[1],'f1','nof','f3')",
            &["h"],
            &[],
        );
        p.check(&["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"]);
        eval(
            p,
            "return redis.call('ZRANGE',KEYS[1],0,-1,'WITHSCORES')",
            &["z"],
            &[],
        );
        eval(p, "return redis.call('ZSCORE',KEYS[1],'b')", &["z"], &[]);
        eval(
            p,
            "return type(redis.call('ZSCORE',KEYS[1],'b'))",
            &["z"],
            &[],
        );
        eval(
            p,
            "return redis.call('ZSCORE',KEYS[1],'nomember')",
            &["z"],
            &[],
        );
        p.check(&["SADD", "si", "3", "1", "2"]);
        eval(p, "return redis.call('SMEMBERS',KEYS[1])", &["si"], &[]);
        eval(
            p,
            "return redis.call('SISMEMBER',KEYS[1], '2')",
            &["si"],
            &[],
        );
        p.check(&["SET", "cnt", "0"]);
        eval(
            p,
            "for i = 1, 10 do redis.call('incr', KEYS[1]) end; return redis.call('get', KEYS[1])",
            &["cnt"],
            &[],
        );
        eval(
            p,
            "return redis.call('EXISTS', 'h', 'z', 'nokey', 'h')",
            &[],
            &[],
        );
    });
}

// ---------------------------------------------------------------------
// RESP3: redis.setresp(3) and the RESP3 reply tables
// ---------------------------------------------------------------------

/// Keys whose replies are RESP3-specific types (map, set, double, null).
fn resp3_fixture(p: &mut Pair) {
    p.script(
        "HSET hash field value f2 v2
        SADD set a b c
        ZADD z 1.5 m 2 n",
    );
}

/// Scripts returning RESP3 replies read with redis.setresp(3) or (2).
const RESP3_SCRIPTS: &[&str] = &[
    "redis.setresp(3); return redis.call('hgetall', 'hash')",
    "redis.setresp(2); return redis.call('hgetall', 'hash')",
    "redis.setresp(3); return redis.call('smembers', 'set')",
    "redis.setresp(3); return redis.call('zscore', 'z', 'm')",
    "redis.setresp(3); return redis.call('zscore', 'z', 'n')",
    "redis.setresp(3); return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "redis.setresp(3); return redis.call('get', 'nokey')",
    "redis.setresp(3); return redis.call('lpop', 'nolist', 2)",
    "redis.setresp(3); return redis.call('hgetall', 'nokey')",
    "redis.setresp(3); return redis.call('exists', 'hash')",
    "redis.setresp(3); return redis.call('ping')",
    "redis.setresp(3); return true",
    "redis.setresp(3); return false",
    "redis.setresp(3); return nil",
    "redis.setresp(3); return {1, 'x', true}",
    "redis.setresp(3); return {redis.call('get','nokey'), 1}",
    "redis.setresp(2); return redis.call('get', 'nokey')",
    "redis.setresp(2); return false",
];

#[test]
fn resp3_script_replies_to_a_resp2_client() {
    let mut p = Pair::new();
    resp3_fixture(&mut p);
    for script in RESP3_SCRIPTS {
        eval(&mut p, script, &[], &[]);
    }
    eval_is(
        &mut p,
        "redis.setresp(3); return redis.call('hgetall', 'hash')",
        "*4\r\n$2\r\nf2\r\n$2\r\nv2\r\n$5\r\nfield\r\n$5\r\nvalue\r\n",
    );
    eval_is(
        &mut p,
        "redis.setresp(3); return redis.call('zscore', 'z', 'm')",
        "$3\r\n1.5\r\n",
    );
    eval_is(&mut p, "redis.setresp(3); return true", ":1\r\n");
    eval_is(&mut p, "redis.setresp(3); return false", ":0\r\n");
}

#[test]
fn resp3_script_replies_to_a_resp3_client() {
    let mut p = Pair::new();
    p.resp3();
    resp3_fixture(&mut p);
    for script in RESP3_SCRIPTS {
        eval(&mut p, script, &[], &[]);
    }
    eval_is(
        &mut p,
        "redis.setresp(3); return redis.call('hgetall', 'hash')",
        "%2\r\n$2\r\nf2\r\n$2\r\nv2\r\n$5\r\nfield\r\n$5\r\nvalue\r\n",
    );
    eval_is(
        &mut p,
        "return redis.call('hgetall', 'hash')",
        "*4\r\n$5\r\nfield\r\n$5\r\nvalue\r\n$2\r\nf2\r\n$2\r\nv2\r\n",
    );
    eval_is(
        &mut p,
        "redis.setresp(3); return redis.call('zscore', 'z', 'm')",
        ",1.5\r\n",
    );
    eval_is(
        &mut p,
        "redis.setresp(3); return redis.call('get', 'nokey')",
        "_\r\n",
    );
    eval_is(&mut p, "redis.setresp(3); return true", "#t\r\n");
    eval_is(&mut p, "redis.setresp(3); return false", "#f\r\n");
    eval_is(&mut p, "return false", "_\r\n");
}

#[test]
fn resp3_replies_seen_from_lua() {
    both_protocols(|p| {
        resp3_fixture(p);
        eval_is(
            p,
            "redis.setresp(3); local r = redis.call('hgetall','hash'); return {type(r), type(r.map), r.map.field}",
            "*3\r\n$5\r\ntable\r\n$5\r\ntable\r\n$5\r\nvalue\r\n",
        );
        eval_is(
            p,
            "redis.setresp(3); local r = redis.call('zscore','z','m'); return {type(r), tostring(r.double)}",
            "*2\r\n$5\r\ntable\r\n$3\r\n1.5\r\n",
        );
        eval_is(
            p,
            "redis.setresp(3); local r = redis.call('get','nokey'); return {type(r), tostring(r)}",
            "*2\r\n$3\r\nnil\r\n$3\r\nnil\r\n",
        );
        eval(
            p,
            "redis.setresp(3); local r = redis.call('smembers','set'); return {type(r.set), tostring(r.set.a), tostring(r.set.z)}",
            &[],
            &[],
        );
        eval(
            p,
            "redis.setresp(3); local r = redis.call('lpop','nolist',2); return type(r)",
            &[],
            &[],
        );
        eval(
            p,
            "redis.setresp(3); local r = redis.call('hgetall','nokey'); local n = 0; for k in pairs(r.map) do n = n + 1 end; return n",
            &[],
            &[],
        );
        // Status and error replies look the same in RESP3.
        eval(
            p,
            "redis.setresp(3); local r = redis.call('ping'); return {type(r), r.ok}",
            &[],
            &[],
        );
        eval(
            p,
            "redis.setresp(3); local r = redis.pcall('incr','hash'); return {type(r), r.err}",
            &[],
            &[],
        );
        // Switching back and forth within one script.
        eval(
            p,
            "redis.setresp(3); local a = redis.call('hgetall','hash'); redis.setresp(2); \
             local b = redis.call('hgetall','hash'); return {type(a.map), #b}",
            &[],
            &[],
        );
        // The setting does not outlive the script.
        eval(p, "return redis.call('hgetall','hash')", &[], &[]);
        eval(
            p,
            "local r = redis.call('get','nokey'); return type(r)",
            &[],
            &[],
        );
    });
}

#[test]
fn resp3_reply_tables_returned_by_scripts() {
    both_protocols(|p| {
        for script in [
            "return {double=3.5}",
            "return {double=0.1}",
            "return {double=3}",
            "return {double=-0.0}",
            "return {double=1e300}",
            "return {double=1/0}",
            "return {double=-1/0}",
            "return {double='1.5'}",
            "return {map={a=1}}",
            "return {map={}}",
            "return {map='x'}",
            "return {map={k={1,2}}}",
            "return {set={a=true}}",
            "return {set={}}",
            "return {set={x=true, y=false}}",
            "return {big_number='123'}",
            "return {big_number='1234567999999999999999999999999999999'}",
            r"return {big_number='1\r\n2'}",
            "return {big_number=123}",
            "return {verbatim_string={format='txt', string='hi'}}",
            "return {verbatim_string={format='toolong', string='x'}}",
            "return {verbatim_string={format='txt'}}",
            "return {1, {double=1.5}, {map={k='v'}}, {set={s=true}}}",
            "return {ok='fine', double=1.5}",
            "return {double=1.5, map={a=1}}",
            "return {map={a=1}, set={b=true}}",
        ] {
            eval(p, script, &[], &[]);
        }
    });
    let mut p = Pair::new();
    eval_is(
        &mut p,
        "return {double=0.1}",
        "$19\r\n0.10000000000000001\r\n",
    );
    eval_is(&mut p, "return {map={a=1}}", "*2\r\n$1\r\na\r\n:1\r\n");
    eval_is(&mut p, "return {big_number='123'}", "$3\r\n123\r\n");
    eval_is(
        &mut p,
        "return {verbatim_string={format='txt', string='hi'}}",
        "$2\r\nhi\r\n",
    );
    p.resp3();
    eval_is(&mut p, "return {double=0.1}", ",0.10000000000000001\r\n");
    eval_is(&mut p, "return {double=1/0}", ",inf\r\n");
    eval_is(&mut p, "return {map={a=1}}", "%1\r\n$1\r\na\r\n:1\r\n");
    eval_is(&mut p, "return {set={a=true}}", "~1\r\n$1\r\na\r\n");
    eval_is(&mut p, "return {big_number='123'}", "(123\r\n");
    eval_is(
        &mut p,
        "return {verbatim_string={format='txt', string='hi'}}",
        "=6\r\ntxt:hi\r\n",
    );
}

#[test]
fn resp3_setresp_argument_errors() {
    both_protocols(|p| {
        eval_err(p, "redis.setresp(4)", "ERR RESP version must be 2 or 3.", 1);
        eval_err(p, "redis.setresp(1)", "ERR RESP version must be 2 or 3.", 1);
        eval_err(
            p,
            "redis.setresp('x')",
            "ERR RESP version must be 2 or 3.",
            1,
        );
        eval_err(
            p,
            "redis.setresp()",
            "ERR redis.setresp() requires one argument.",
            1,
        );
        eval_err(
            p,
            "redis.setresp(2, 3)",
            "ERR redis.setresp() requires one argument.",
            1,
        );
        // A numeric string and a float that truncates to 3 are accepted.
        eval(
            p,
            "redis.setresp('3'); return redis.call('hgetall','nokey')",
            &[],
            &[],
        );
        eval(
            p,
            "redis.setresp(3.7); return redis.call('get','nokey')",
            &[],
            &[],
        );
        eval(p, "return redis.setresp(2)", &[], &[]);
    });
}

// ---------------------------------------------------------------------
// Errors raised by redis.call and by Lua
// ---------------------------------------------------------------------

#[test]
fn redis_call_errors_abort_the_script_with_a_suffix() {
    both_protocols(|p| {
        eval_err(
            p,
            "redis.call('nosuchcommand')",
            "ERR Unknown Redis command called from script",
            1,
        );
        eval_err(
            p,
            "return redis.call('get','a','b','c')",
            "ERR Wrong number of args calling Redis command from script",
            1,
        );
        eval_err(
            p,
            "redis.call('set','invalid')",
            "ERR Wrong number of args calling Redis command from script",
            1,
        );
        eval_err(
            p,
            "redis.call('incr')",
            "ERR Wrong number of args calling Redis command from script",
            1,
        );
        p.check(&["SET", "foo", "bar"]);
        let script = "redis.call('lpush',KEYS[1],'val')";
        let r = eval(p, script, &["foo"], &[]);
        assert_reply(
            &r,
            &format!(
                "-WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:1.\r\n",
                sha(script)
            ),
        );
        eval_err(
            p,
            "return redis.call('incr','foo')",
            "ERR value is not an integer or out of range",
            1,
        );
        eval_err(
            p,
            "return redis.call('select',99)",
            "ERR DB index is out of range",
            1,
        );
        // The line is the script line that called redis.call.
        eval_err(
            p,
            "local x = 1\nredis.call('nosuch')",
            "ERR Unknown Redis command called from script",
            2,
        );
        eval_err(
            p,
            "local function f() redis.call('nosuch') end\nlocal x = 1\nf()",
            "ERR Unknown Redis command called from script",
            1,
        );
        // Subcommand arity and unknown subcommands.
        eval(p, "return redis.call('object')", &[], &[]);
        eval(p, "return redis.call('object', 'nosuch')", &[], &[]);
        eval(p, "return redis.pcall('object', 'nosuch')", &[], &[]);
        // Command names are case-insensitive.
        eval(p, "return redis.call('SeT', 'k', 'v')", &[], &[]);
        eval(p, "return redis.call('GET', 'k')", &[], &[]);
    });
}

#[test]
fn redis_call_argument_errors() {
    both_protocols(|p| {
        eval_err(
            p,
            "return redis.call()",
            "ERR Please specify at least one argument for this redis lib call",
            1,
        );
        eval_is(
            p,
            "return redis.pcall()",
            "-ERR Please specify at least one argument for this redis lib call\r\n",
        );
        for script in [
            "return redis.call({})",
            "return redis.call('get', {})",
            "return redis.call('set', 'n', true)",
            "return redis.call('set', 'n', nil)",
            "local x={}; return redis.call('ping', x)",
            "return redis.call('ping', function() end)",
        ] {
            eval_err(
                p,
                script,
                "ERR Lua redis lib command arguments must be strings or integers",
                1,
            );
        }
        eval_is(
            p,
            "return redis.pcall('get', {})",
            "-ERR Lua redis lib command arguments must be strings or integers\r\n",
        );
        // The cached argument vector survives the failure.
        eval_is(p, "return redis.call('ping', 'asdf')", "$4\r\nasdf\r\n");
        // Numbers are converted like Lua's tostring (%.14g).
        eval(p, "return redis.call('echo', 3.5)", &[], &[]);
        eval(p, "return redis.call('echo', 42)", &[], &[]);
        eval(p, "return redis.call('echo', -0.000001)", &[], &[]);
        eval(p, "return redis.call('echo', 2^53)", &[], &[]);
        eval(p, "return redis.call('echo', 1/0)", &[], &[]);
        eval(p, "return redis.call('echo', 0/0)", &[], &[]);
        // A number as the command name.
        eval(p, "return redis.pcall(1)", &[], &[]);
        eval(p, "return redis.call('echo', '')", &[], &[]);
        eval(p, "return redis.call('echo', '\\0')", &[], &[]);
    });
}

#[test]
fn commands_not_allowed_from_scripts() {
    let mut p = Pair::new();
    for call in [
        "'watch','s'",
        "'unwatch'",
        "'multi'",
        "'exec'",
        "'discard'",
        "'subscribe','c'",
        "'psubscribe','c*'",
        "'unsubscribe'",
        "'eval','return 1','0'",
        "'evalsha','ffd632c7d33e571e9f24556ebed26c3479a87130','0'",
        "'eval_ro','return 1','0'",
        "'script','load','return 1'",
        "'script','exists','x'",
        "'script','flush'",
        "'auth','x'",
        "'hello'",
        "'client','id'",
        "'client','list'",
        "'save'",
        "'bgsave'",
        "'shutdown'",
        "'config','get','maxmemory'",
        "'quit'",
        "'reset'",
        "'blpop','nolist',0",
        "'brpop','nolist',0",
        "'brpoplpush','a','b',0",
        "'blmove','a','b','LEFT','LEFT',0",
        "'bzpopmin','z',0",
        "'bzpopmax','z',0",
    ] {
        let script = format!("return redis.call({call})");
        eval_err(
            &mut p,
            &script,
            "ERR This Redis command is not allowed from script",
            1,
        );
        eval_is(
            &mut p,
            &format!("return redis.pcall({call})"),
            "-ERR This Redis command is not allowed from script\r\n",
        );
    }
    // Blocking commands are refused even when they could be served at once.
    p.check(&["RPUSH", "l", "a"]);
    eval(&mut p, "return redis.call('blpop','l',0)", &[], &[]);
    p.check(&["LRANGE", "l", "0", "-1"]);
    // Commands that are allowed.
    for call in [
        "'ping'",
        "'echo','x'",
        "'publish','c','m'",
        "'type','l'",
        "'dbsize'",
        "'exists','l'",
        "'object','encoding','l'",
        "'randomkey'",
        "'select','0'",
    ] {
        eval(&mut p, &format!("return redis.call({call})"), &[], &[]);
    }
}

#[test]
fn blmpop_and_bzmpop_do_not_block_in_scripts() {
    // Unlike the other blocking commands, Redis 7.0 lets scripts call these
    // two: they answer at once (null when there is nothing to pop).
    let mut p = Pair::new();
    eval_is(
        &mut p,
        "return redis.call('blmpop',0,1,'a','LEFT')",
        "$-1\r\n",
    );
    eval_is(
        &mut p,
        "return redis.call('bzmpop',0,1,'z','MIN')",
        "$-1\r\n",
    );
    p.check(&["RPUSH", "a", "x", "y"]);
    p.check(&["ZADD", "z", "1", "m"]);
    eval_is(
        &mut p,
        "return redis.call('blmpop',0,1,'a','LEFT')",
        "*2\r\n$1\r\na\r\n*1\r\n$1\r\nx\r\n",
    );
    eval(
        &mut p,
        "return redis.call('blmpop',5,2,'nolist','a','RIGHT','COUNT',5)",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return redis.call('bzmpop',0,1,'z','MIN')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return redis.call('blmpop',0,1,'a','LEFT')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return redis.call('blmpop',-1,1,'a','LEFT')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return redis.pcall('bzmpop','x',1,'z','MIN')",
        &[],
        &[],
    );
    p.check(&["EXISTS", "a", "z"]);
    p.resp3();
    eval(
        &mut p,
        "return redis.call('blmpop',0,1,'a','LEFT')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "redis.setresp(3); return redis.call('blmpop',0,1,'a','LEFT')",
        &[],
        &[],
    );
}

#[test]
fn blocking_stream_reads_are_refused_in_scripts() {
    let mut p = Pair::new();
    p.check(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    eval_is(
        &mut p,
        "return redis.pcall('xread','STREAMS','s','$')",
        "$-1\r\n",
    );
    eval_err(
        &mut p,
        "return redis.call('xread','BLOCK',0,'STREAMS','s','$')",
        "ERR xread command is not allowed with BLOCK option from scripts",
        1,
    );
    eval_is(
        &mut p,
        "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')",
        "$-1\r\n",
    );
    eval_err(
        &mut p,
        "return redis.call('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
        "ERR xreadgroup command is not allowed with BLOCK option from scripts",
        1,
    );
    eval(
        &mut p,
        "return redis.pcall('xread','BLOCK',100,'STREAMS','s','$')",
        &[],
        &[],
    );
    p.check(&["XADD", "s", "1-1", "f", "v"]);
    eval(
        &mut p,
        "return redis.call('xread','STREAMS','s','0')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return redis.call('xread','BLOCK',0,'STREAMS','s','0')",
        &[],
        &[],
    );
}

#[test]
fn runtime_errors_carry_the_script_sha_and_line() {
    both_protocols(|p| {
        eval_err(p, "error('x')", "ERR user_script:1: x", 1);
        eval_err(p, "error('x', 0)", "ERR x", 1);
        eval_err(p, "error(42)", "ERR user_script:1: 42", 1);
        eval_err(p, "error()", "ERR nil", 1);
        eval_err(p, "error(nil)", "ERR nil", 1);
        eval_err(p, "error(true)", "ERR true", 1);
        eval_err(p, "error({err='X y'})", "X y", 1);
        eval_err(
            p,
            "error({err='ERR custom', source='src', line=9})",
            "ERR custom",
            1,
        );
        eval_err(p, "error({err=5})", "5", 1);
        eval_err(
            p,
            "local a = nil; return a + 1",
            "ERR user_script:1: attempt to perform arithmetic on local 'a' (a nil value)",
            1,
        );
        eval_err(
            p,
            "return nil + 1",
            "ERR user_script:1: attempt to perform arithmetic on a nil value",
            1,
        );
        eval_err(
            p,
            "local t = nil; return t.x",
            "ERR user_script:1: attempt to index local 't' (a nil value)",
            1,
        );
        eval_err(
            p,
            "local x = 1\nlocal y = 2\nerror('third line')",
            "ERR user_script:3: third line",
            3,
        );
        eval_err(
            p,
            "assert(false)",
            "ERR user_script:1: assertion failed!",
            1,
        );
        eval_err(p, "assert(false, 'msg')", "ERR user_script:1: msg", 1);
        eval_err(
            p,
            "return math.random(1,2,3)",
            "ERR user_script:1: wrong number of arguments",
            1,
        );
        eval_err(
            p,
            "return ('x'):bad()",
            "ERR user_script:1: attempt to call method 'bad' (a nil value)",
            1,
        );
        eval(p, "return string.rep()", &[], &[]);
        eval(p, "return tostring()", &[], &[]);
        eval(p, "return #nil", &[], &[]);
        eval(p, "return {} .. 'x'", &[], &[]);
        eval(p, "return 1 < 'x'", &[], &[]);
        eval(
            p,
            "local function f() return f() + 1 end return f()",
            &[],
            &[],
        );
        eval(
            p,
            "return loadstring(string.dump(function() return 1 end))()",
            &[],
            &[],
        );
    });
}

#[test]
fn compile_errors() {
    both_protocols(|p| {
        for (script, expected) in [
            (
                "return +",
                "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n",
            ),
            (
                "return 'a",
                "-ERR Error compiling script (new function): user_script:1: unfinished string near '<eof>'\r\n",
            ),
            (
                "local x = 1\nif x then",
                "-ERR Error compiling script (new function): user_script:2: 'end' expected near '<eof>'\r\n",
            ),
            (
                "return 1 end",
                "-ERR Error compiling script (new function): user_script:1: '<eof>' expected near 'end'\r\n",
            ),
        ] {
            eval_is(p, script, expected);
            p.check(&["SCRIPT", "LOAD", script]);
            p.check(&["SCRIPT", "EXISTS", &sha(script)]);
        }
        eval(p, "x y z", &[], &[]);
        eval(p, "return = 1", &[], &[]);
        eval(p, "\x1bLua", &[], &[]);
    });
}

#[test]
fn pcall_catches_errors() {
    both_protocols(|p| {
        eval_is(
            p,
            "local status, res = pcall(function() return 1 end); return 'status: ' .. tostring(status) .. ' result: ' .. res",
            "$22\r\nstatus: true result: 1\r\n",
        );
        eval_is(
            p,
            "local status, res = pcall(function() return foo end); return 'status: ' .. tostring(status) .. ' result: ' .. res",
            "$97\r\nstatus: false result: user_script:1: Script attempted to access nonexistent global variable 'foo'\r\n",
        );
        // Redis's pcall turns an error table into its message string.
        eval_is(
            p,
            "local ok, e = pcall(function() redis.call('nosuch') end); return {tostring(ok), type(e), e}",
            "*3\r\n$5\r\nfalse\r\n$6\r\nstring\r\n$44\r\nERR Unknown Redis command called from script\r\n",
        );
        eval_is(
            p,
            "local ok, e = pcall(function() error({err='ERR x'}) end); return e",
            "$5\r\nERR x\r\n",
        );
        eval_is(
            p,
            "local ok, e = pcall(error, 'x'); return {tostring(ok), e}",
            "*2\r\n$5\r\nfalse\r\n$1\r\nx\r\n",
        );
        eval(
            p,
            "local ok, e = pcall(function() return nil + 1 end); return {tostring(ok), e}",
            &[],
            &[],
        );
        eval(
            p,
            "return pcall(function() redis.call('nosuch') end)",
            &[],
            &[],
        );
        eval(p, "return {pcall(function() return 1, 2, 3 end)}", &[], &[]);
        eval(
            p,
            "local ok, e = pcall(error); return {tostring(ok), tostring(e)}",
            &[],
            &[],
        );
        eval(
            p,
            "local ok, e = pcall(error, {x=1}); return type(e)",
            &[],
            &[],
        );
        eval(
            p,
            "local ok, e = pcall(error, {err=1}); return {type(e), e}",
            &[],
            &[],
        );
        // xpcall with a handler.
        eval(
            p,
            "return {xpcall(function() error('boom') end, function(m) return 'handled: ' .. m end)}",
            &[],
            &[],
        );
        eval(
            p,
            "return {xpcall(function() redis.call('nosuch') end, function(m) return type(m) end)}",
            &[],
            &[],
        );
        // Commands run by a failing pcall'd function keep their effects.
        eval(
            p,
            "pcall(function() redis.call('set','pk','1'); error('x') end); return redis.call('get','pk')",
            &[],
            &[],
        );
    });
}

// ---------------------------------------------------------------------
// The sandbox
// ---------------------------------------------------------------------

#[test]
fn globals_are_protected() {
    both_protocols(|p| {
        eval_err(
            p,
            "return a",
            "ERR user_script:1: Script attempted to access nonexistent global variable 'a'",
            1,
        );
        eval_err(
            p,
            "a=10",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "x = 1",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "function f() end",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        // setmetatable is a C function: no position in the message.
        eval_err(
            p,
            "setmetatable(_G, {})",
            "ERR Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "local g = getmetatable(_G); g.__index = {}",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "redis = function() return 1 end",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "_G = {}",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "KEYS = {}",
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
        // rawset is a C function: no position in the message.
        eval_err(
            p,
            "rawset(_G, 'y', 1)",
            "ERR Attempt to modify a readonly table",
            1,
        );
        eval_err(
            p,
            "local x = 1\nlocal y = 2\nreturn zzz",
            "ERR user_script:3: Script attempted to access nonexistent global variable 'zzz'",
            3,
        );
        // Locals are fine, and rawget of a missing global is nil.
        eval(p, "local a = 10; return a", &[], &[]);
        eval(p, "return rawget(_G, 'nope') == nil", &[], &[]);
        eval(p, "return type(_G)", &[], &[]);
        // KEYS and ARGV are replaced by each call.
        eval(p, "return {#KEYS, #ARGV}", &["a", "b"], &["c"]);
        eval(p, "return {#KEYS, #ARGV}", &[], &[]);
        // Lua's own global table can be modified through locals only.
        eval(p, "local t = {}; t.x = 1; return t.x", &[], &[]);
    });
}

#[test]
fn library_tables_are_read_only() {
    let mut p = Pair::new();
    for script in [
        "redis.call = function() return 1 end",
        "cjson.encode = function() return 1 end",
        "cmsgpack.pack = function() return 1 end",
        "bit.lshift = function() return 1 end",
        "struct.pack = nil",
        "string.foo = 1",
        "table.insert = nil",
        "math.pi = 3",
        "coroutine.x = 1",
        "redis.REPL_ALL = 5",
    ] {
        eval_err(
            &mut p,
            script,
            "ERR user_script:1: Attempt to modify a readonly table",
            1,
        );
    }
    // Strings' metatable still gives methods.
    eval(&mut p, "return ('x'):rep(3)", &[], &[]);
    eval(&mut p, "return ('%d-%s'):format(5, 'a')", &[], &[]);
}

#[test]
fn unavailable_functions_and_libraries() {
    let mut p = Pair::new();
    for name in [
        "os", "io", "loadfile", "dofile", "require", "debug", "print", "setfenv", "getfenv",
        "newproxy", "module", "package",
    ] {
        eval_err(
            &mut p,
            &format!("return type({name})"),
            &format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable '{name}'"
            ),
            1,
        );
    }
    eval_err(
        &mut p,
        "loadfile('some file')",
        "ERR user_script:1: Script attempted to access nonexistent global variable 'loadfile'",
        1,
    );
    eval_err(
        &mut p,
        "print('some data')",
        "ERR user_script:1: Script attempted to access nonexistent global variable 'print'",
        1,
    );
    eval(&mut p, "return os.time()", &[], &[]);
    for name in [
        "loadstring",
        "load",
        "gcinfo",
        "collectgarbage",
        "unpack",
        "rawset",
        "rawget",
        "rawequal",
        "setmetatable",
        "getmetatable",
        "coroutine",
        "select",
        "xpcall",
        "pcall",
        "tonumber",
        "tostring",
        "next",
        "ipairs",
        "pairs",
        "assert",
        "error",
        "type",
    ] {
        eval(&mut p, &format!("return type({name})"), &[], &[]);
    }
    eval_is(&mut p, "return _VERSION", "$7\r\nLua 5.1\r\n");
}

#[test]
fn global_environment_inventory() {
    let mut p = Pair::new();
    let list = |table: &str| {
        format!(
            "local t = {{}}; for k,v in pairs({table}) do t[#t+1] = k .. ':' .. type(v) end; table.sort(t); return t"
        )
    };
    let r = eval(&mut p, &list("_G"), &[], &[]);
    assert!(
        show(&r).contains("__redis__err__handler:function"),
        "{}",
        show(&r)
    );
    assert!(r.starts_with(b"*35\r\n"), "{}", show(&r));
    let r = eval(&mut p, &list("redis"), &[], &[]);
    assert!(r.starts_with(b"*23\r\n"), "{}", show(&r));
    for table in [
        "math",
        "string",
        "table",
        "cjson",
        "bit",
        "struct",
        "cmsgpack",
        "coroutine",
    ] {
        eval(&mut p, &list(table), &[], &[]);
    }
    eval(
        &mut p,
        "return {cjson._NAME, cjson._VERSION, cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {type(struct), type(cjson), type(cmsgpack), type(bit)}",
        &[],
        &[],
    );
}

#[test]
fn loadstring_and_coroutines() {
    both_protocols(|p| {
        eval_is(p, "return loadstring('return 1+2')()", ":3\r\n");
        eval_is(
            p,
            "local f, e = loadstring('return +'); return {tostring(f), e}",
            "*2\r\n$3\r\nnil\r\n$49\r\n[string \"return +\"]:1: unexpected symbol near '+'\r\n",
        );
        // Binary chunks are refused: loadstring returns nil.
        eval(
            p,
            "local f, e = loadstring(string.dump(function() return 1 end)); return {tostring(f), e}",
            &[],
            &[],
        );
        // Chunks run in the protected global environment.
        eval(p, "return loadstring('x = 1')()", &[], &[]);
        eval(
            p,
            "return loadstring('return redis.call(\"ping\")')()",
            &[],
            &[],
        );
        eval(p, "return {loadstring('return ...')(1, 2)}", &[], &[]);
        eval(
            p,
            "local co = coroutine.create(function(a) local b = coroutine.yield(a + 1); return b * 2 end); \
             local _, x = coroutine.resume(co, 1); local _, y = coroutine.resume(co, 10); \
             return {x, y, coroutine.status(co)}",
            &[],
            &[],
        );
        eval(
            p,
            "local co = coroutine.wrap(function() redis.call('set', 'cokey', 'v'); coroutine.yield(1) end); co(); return redis.call('get', 'cokey')",
            &[],
            &[],
        );
        eval(p, "return select('#', 1, nil, 3)", &[], &[]);
        eval(p, "return {unpack({1, 2, 3})}", &[], &[]);
        eval(
            p,
            "return tostring(tonumber('0x10')) .. tostring(tonumber('z', 36))",
            &[],
            &[],
        );
    });
}

// ---------------------------------------------------------------------
// math.random: the same deterministic sequence as Redis
// ---------------------------------------------------------------------

#[test]
fn math_random_follows_redis_sequence() {
    // Redis seeds its generator once at start-up and never reseeds it for a
    // script, so a fresh server produces a fixed sequence across scripts.
    let mut p = Pair::new();
    let r = eval(
        &mut p,
        "return {tostring(math.random()), math.random(100), math.random(5,10), tostring(math.random())}",
        &[],
        &[],
    );
    assert_reply(
        &r,
        "*4\r\n$16\r\n0.39646477363839\r\n:85\r\n:7\r\n$16\r\n0.44658343468168\r\n",
    );
    eval_is(
        &mut p,
        "return tostring(math.random())",
        "$16\r\n0.31869277233197\r\n",
    );
    for _ in 0..5 {
        eval(
            &mut p,
            "local t = {}; for i = 1, 20 do t[i] = math.random(1000000) end; return t",
            &[],
            &[],
        );
    }
    eval(&mut p, "return math.random(-5, -1)", &[], &[]);
    eval(&mut p, "return math.random(1)", &[], &[]);
    eval(&mut p, "return math.random(3.7)", &[], &[]);
    eval(&mut p, "return tostring(math.random() * 100000)", &[], &[]);
    // SCRIPT FLUSH resets Lua, not the generator.
    p.check(&["SCRIPT", "FLUSH"]);
    eval(&mut p, "return tostring(math.random())", &[], &[]);
    // Other commands that use randomness do not move the script generator.
    p.check(&["SADD", "s", "a", "b", "c"]);
    p.check(&["RANDOMKEY"]);
    eval(&mut p, "return tostring(math.random())", &[], &[]);
}

#[test]
fn math_randomseed_makes_repeatable_sequences() {
    let mut p = Pair::new();
    let script = "math.randomseed(ARGV[1]); return {tostring(math.random()), math.random(1000)}";
    let a = eval(&mut p, script, &[], &["10"]);
    let b = eval(&mut p, script, &[], &["10"]);
    assert_eq!(a, b);
    assert_reply(&a, "*2\r\n$16\r\n0.87885112309775\r\n:796\r\n");
    eval(&mut p, script, &[], &["20"]);
    eval(&mut p, script, &[], &["0"]);
    eval(&mut p, script, &[], &["-7"]);
    eval(&mut p, script, &[], &["4294967297"]);
    eval(&mut p, script, &[], &["3.9"]);
    // The seed persists after the script.
    eval(&mut p, "return math.random(1000)", &[], &[]);
    eval(&mut p, "return math.randomseed(1)", &[], &[]);
    eval(&mut p, "return math.random(1000)", &[], &[]);
}

#[test]
fn math_random_argument_errors() {
    let mut p = Pair::new();
    eval_err(
        &mut p,
        "return math.random(0)",
        "ERR user_script:1: bad argument #1 to 'random' (interval is empty)",
        1,
    );
    eval_err(
        &mut p,
        "return math.random(5,1)",
        "ERR user_script:1: bad argument #2 to 'random' (interval is empty)",
        1,
    );
    eval_err(
        &mut p,
        "return math.random(1,2,3)",
        "ERR user_script:1: wrong number of arguments",
        1,
    );
    eval_err(
        &mut p,
        "math.randomseed('x')",
        "ERR user_script:1: bad argument #1 to 'randomseed' (number expected, got string)",
        1,
    );
    eval_err(
        &mut p,
        "return math.random('a')",
        "ERR user_script:1: bad argument #1 to 'random' (number expected, got string)",
        1,
    );
    eval(&mut p, "return math.randomseed()", &[], &[]);
    eval(&mut p, "return math.random('3')", &[], &[]);
}

// ---------------------------------------------------------------------
// The redis.* helpers
// ---------------------------------------------------------------------

#[test]
fn redis_sha1hex() {
    both_protocols(|p| {
        eval_is(
            p,
            "return {redis.sha1hex(''), redis.sha1hex('Pizza & Mandolino')}",
            "*2\r\n$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n",
        );
        eval(p, "return redis.sha1hex(123)", &[], &[]);
        eval(p, "return redis.sha1hex(1.5)", &[], &[]);
        eval(p, "return redis.sha1hex('a\\0b')", &[], &[]);
        // A table has no string form: the digest of nothing.
        eval(p, "return redis.sha1hex({})", &[], &[]);
        eval(p, "return redis.sha1hex(true)", &[], &[]);
        eval_err(
            p,
            "return redis.sha1hex()",
            "ERR wrong number of arguments",
            1,
        );
        eval_err(
            p,
            "return redis.sha1hex('a','b')",
            "ERR wrong number of arguments",
            1,
        );
        // The digest of a script is its EVALSHA name.
        let script = "return redis.sha1hex('x')";
        eval(p, script, &[], &[]);
        p.check(&["EVALSHA", &sha(script), "0"]);
    });
}

#[test]
fn redis_log_returns_nothing_and_checks_arguments() {
    both_protocols(|p| {
        eval(
            p,
            "return redis.log(redis.LOG_WARNING, 'hello', 1, 'x')",
            &[],
            &[],
        );
        eval(p, "return redis.log(redis.LOG_DEBUG, 'hello')", &[], &[]);
        eval(p, "return redis.log(redis.LOG_VERBOSE, 'v')", &[], &[]);
        eval(
            p,
            "return redis.log(redis.LOG_NOTICE, 'n', {}, nil, true)",
            &[],
            &[],
        );
        eval(p, "return redis.log('1', 'numeric string level')", &[], &[]);
        eval(p, "return redis.log(3.5, 'float level')", &[], &[]);
        eval(p, "return {redis.log(redis.LOG_WARNING, 'x')}", &[], &[]);
        eval_err(
            p,
            "redis.log(redis.LOG_WARNING)",
            "ERR redis.log() requires two arguments or more.",
            1,
        );
        eval_err(
            p,
            "redis.log()",
            "ERR redis.log() requires two arguments or more.",
            1,
        );
        eval_err(
            p,
            "redis.log('x', 'y')",
            "ERR First argument must be a number (log level).",
            1,
        );
        eval_err(p, "redis.log(99, 'y')", "ERR Invalid debug level.", 1);
        eval_err(p, "redis.log(-1, 'y')", "ERR Invalid debug level.", 1);
        eval(
            p,
            "return redis.pcall('ping') and redis.log(4, 'y')",
            &[],
            &[],
        );
    });
}

#[test]
fn redis_constants_and_replication_helpers() {
    both_protocols(|p| {
        eval_is(
            p,
            "return {redis.REPL_ALL, redis.REPL_AOF, redis.REPL_NONE, redis.REPL_REPLICA, redis.REPL_SLAVE, \
             redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
            "*9\r\n:3\r\n:1\r\n:0\r\n:2\r\n:2\r\n:0\r\n:1\r\n:2\r\n:3\r\n",
        );
        eval(p, "return type(redis.REDIS_VERSION)", &[], &[]);
        eval(p, "return type(redis.REDIS_VERSION_NUM)", &[], &[]);
        eval_is(
            p,
            "redis.call('set','foo','bar'); return redis.replicate_commands()",
            ":1\r\n",
        );
        eval(p, "return redis.set_repl(redis.REPL_ALL)", &[], &[]);
        for flags in [
            "redis.REPL_NONE",
            "redis.REPL_AOF",
            "redis.REPL_REPLICA",
            "'a'",
            "'2'",
        ] {
            eval(
                p,
                &format!("redis.set_repl({flags}); redis.call('incr','rc'); return redis.call('get','rc')"),
                &[],
                &[],
            );
        }
        eval_err(
            p,
            "redis.set_repl(12345)",
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            1,
        );
        eval_err(
            p,
            "redis.set_repl(-1)",
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            1,
        );
        eval_err(
            p,
            "redis.set_repl()",
            "ERR redis.set_repl() requires two arguments.",
            1,
        );
        eval_err(
            p,
            "redis.set_repl(1, 2)",
            "ERR redis.set_repl() requires two arguments.",
            1,
        );
        // The keyspace got every write whatever the replication flags.
        p.check(&["GET", "rc"]);
        p.check(&["GET", "foo"]);
    });
}

#[test]
fn redis_breakpoint_debug_and_acl_check() {
    both_protocols(|p| {
        // Outside a debugging session these do nothing.
        eval(p, "return redis.breakpoint()", &[], &[]);
        eval(p, "return redis.debug('x', 1)", &[], &[]);
        eval(p, "return redis.debug()", &[], &[]);
        eval_is(p, "return redis.acl_check_cmd('set','x','1')", ":1\r\n");
        eval(p, "return redis.acl_check_cmd('get','x')", &[], &[]);
        eval_err(
            p,
            "return redis.acl_check_cmd('nosuch')",
            "ERR Invalid command passed to redis.acl_check_cmd()",
            1,
        );
        eval_err(
            p,
            "return redis.acl_check_cmd()",
            "ERR Please specify at least one argument for this redis lib call",
            1,
        );
    });
}

// ---------------------------------------------------------------------
// Libraries: cjson, bit, struct, cmsgpack
// ---------------------------------------------------------------------

/// Lua that hex-encodes the string in `s`.
const HEX: &str =
    "local h = ''; for i = 1, #s do h = h .. string.format('%02x', s:byte(i)) end; return h";

#[test]
fn cjson_encode() {
    let mut p = Pair::new();
    eval_is(
        &mut p,
        "return cjson.encode({1,2,'a',true,false,cjson.null,{x=1}})",
        "$33\r\n[1,2,\"a\",true,false,null,{\"x\":1}]\r\n",
    );
    for value in [
        "{a={b={1.5,-0.25,1e100,3.14159265358979}}}",
        "{}",
        "'a\"b\\\\c/\\1\\n\\t\\r\\8\\127'",
        "'\\200\\255'",
        "{[1]=1,[3]=3}",
        "0.1",
        "-0",
        "123456789012345",
        "2^53",
        "1e-7",
        "true",
        "cjson.null",
        "{[1]='one', two='x'}",
        "{one='one', [1]='one'}",
        "{{},{{}}}",
        "{['k\"']='v'}",
        "string.rep('x', 300)",
        "{1, nil, 3}",
    ] {
        eval(&mut p, &format!("return cjson.encode({value})"), &[], &[]);
    }
    eval_err(
        &mut p,
        "return cjson.encode({[1]=1,[20]=3})",
        "ERR user_script:1: Cannot serialise table: excessively sparse array",
        1,
    );
    eval_err(
        &mut p,
        "return cjson.encode(function() end)",
        "ERR user_script:1: Cannot serialise function: type not supported",
        1,
    );
    eval_err(
        &mut p,
        "return cjson.encode(1/0)",
        "ERR user_script:1: Cannot serialise number: must not be NaN or Inf",
        1,
    );
    eval(&mut p, "return cjson.encode({[true]=1})", &[], &[]);
    eval(&mut p, "return cjson.encode()", &[], &[]);
    eval(
        &mut p,
        "local a = {}; a[1] = a; return cjson.encode(a)",
        &[],
        &[],
    );
    eval(
        &mut p,
        "local t = {}; for i = 1, 10 do t['k' .. i] = i end; local s = cjson.encode(t); return {#s, cjson.decode(s).k7}",
        &[],
        &[],
    );
}

#[test]
fn cjson_decode() {
    let mut p = Pair::new();
    eval_is(
        &mut p,
        "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
        "$26\r\n0 -5000 -1 0.0003 1023.2 0\r\n",
    );
    eval_is(
        &mut p,
        r#"local decoded = cjson.decode('{"keya": "a", "keyb": "b"}'); return {decoded.keya, decoded.keyb}"#,
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    eval(
        &mut p,
        r#"local t = cjson.decode('{"a":[1,2,{"b":null}],"c":"\\u00e9\\n","d":1.5e3}'); return {t.a[1], t.a[3].b == cjson.null, t.c, tostring(t.d)}"#,
        &[],
        &[],
    );
    for json in [
        "true",
        r#""x""#,
        "null",
        "[]",
        "{}",
        "  [1 , 2 ]  ",
        r#""\ud83d\ude00""#,
        "-0",
        "1E2",
        "123456789012345678901234567890",
    ] {
        eval(
            &mut p,
            &format!(
                "local v = cjson.decode('{json}'); return {{type(v), type(v) == 'table' and #v or tostring(v)}}"
            ),
            &[],
            &[],
        );
    }
    for (json, message) in [
        (
            "[1,2",
            "Expected comma or array end but found T_END at character 5",
        ),
        ("", "Expected value but found T_END at character 1"),
        (
            r#"{"a":1,}"#,
            "Expected object key string but found T_OBJ_END at character 8",
        ),
    ] {
        eval_err(
            &mut p,
            &format!("return cjson.decode('{json}')"),
            &format!("ERR user_script:1: {message}"),
            1,
        );
    }
    for json in [
        "[1,]",
        "{\"a\" 1}",
        "nul",
        "'x'",
        "[1] x",
        "0x10",
        "NaN",
        "[\"\\x\"]",
    ] {
        eval(&mut p, &format!("return cjson.decode('{json}')"), &[], &[]);
    }
    eval(&mut p, "return cjson.decode()", &[], &[]);
    eval(&mut p, "return cjson.decode(1)", &[], &[]);
}

#[test]
fn cjson_configuration_functions() {
    let mut p = Pair::new();
    eval(
        &mut p,
        r#"
        local some_map = {s1="Some string", n1=100, a1={"Some","String","Array"}, nil1=nil, b1=true, b2=false}
        local encoded = cjson.encode(some_map)
        local decoded = cjson.decode(encoded)
        assert(table.concat(some_map) == table.concat(decoded))
        cjson.encode_keep_buffer(false)
        encoded = cjson.encode(some_map)
        decoded = cjson.decode(encoded)
        assert(table.concat(some_map) == table.concat(decoded))
        local invalid_map = {}
        invalid_map[false] = "false"
        local ok, encoded = pcall(cjson.encode, invalid_map)
        assert(ok == false)
        cjson.encode_max_depth(1)
        ok, encoded = pcall(cjson.encode, some_map)
        assert(ok == false)
        cjson.decode_max_depth(1)
        ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
        assert(ok == false)
        ok, encoded = pcall(cjson.encode, {num1=0/0})
        assert(ok == false)
        cjson.encode_invalid_numbers(true)
        ok, encoded = pcall(cjson.encode, {num1=0/0})
        assert(ok == true)
        cjson.decode_max_depth(1000)
        cjson.encode_max_depth(1000)
        cjson.encode_invalid_numbers(false)
        return 'done'
        "#,
        &[],
        &[],
    );
    eval(
        &mut p,
        "local r = {cjson.encode_number_precision(3)}; local s = cjson.encode(3.14159); cjson.encode_number_precision(14); return {s, unpack(r)}",
        &[],
        &[],
    );
    eval(&mut p, "return {cjson.encode_sparse_array()}", &[], &[]);
    eval(&mut p, "return cjson.encode_number_precision(0)", &[], &[]);
    eval(&mut p, "return cjson.encode_max_depth(0)", &[], &[]);
    eval(&mut p, "return type(cjson.new())", &[], &[]);
}

#[test]
fn bit_library() {
    let mut p = Pair::new();
    eval_is(
        &mut p,
        "return {bit.band(0xff, 0x0f), bit.bor(1,2,4), bit.bxor(5,3), bit.bnot(0), bit.lshift(1,31), \
         bit.rshift(-1,28), bit.arshift(-256,4), bit.rol(0x12345678,8), bit.ror(0x12345678,8), \
         bit.tohex(255), bit.tohex(-1,-4), bit.tobit(2^32+5), bit.bswap(0x12345678)}",
        "*13\r\n:15\r\n:7\r\n:6\r\n:-1\r\n:-2147483648\r\n:15\r\n:-16\r\n:878082066\r\n:2014458966\r\n\
         $8\r\n000000ff\r\n$4\r\nFFFF\r\n:5\r\n:2018915346\r\n",
    );
    eval(
        &mut p,
        "assert(bit.tobit(1) == 1); assert(bit.band(1) == 1); assert(bit.bxor(1,2) == 3); \
         assert(bit.bor(1,2,4,8,16,32,64,128) == 255); return 'ok'",
        &[],
        &[],
    );
    eval(
        &mut p,
        "assert(0x7fffffff == 2147483647, 'broken hex literals'); \
         assert(0xffffffff == -1 or 0xffffffff == 2^32-1, 'broken hex literals'); \
         assert(tostring(-1) == '-1', 'broken tostring()'); \
         assert(tostring(0xffffffff) == '-1' or tostring(0xffffffff) == '4294967295', 'broken tostring()')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {bit.tohex(0x1234, 2), bit.tohex(1.5), bit.lshift(1, 33), bit.tobit('12'), bit.band(-1.5)}",
        &[],
        &[],
    );
    eval_err(
        &mut p,
        "return bit.band('x')",
        "ERR user_script:1: bad argument #1 to 'band' (number expected, got string)",
        1,
    );
    eval(&mut p, "return bit.band()", &[], &[]);
    eval(&mut p, "return bit.tobit()", &[], &[]);
}

#[test]
fn struct_library() {
    let mut p = Pair::new();
    eval_is(
        &mut p,
        &format!("local s = struct.pack('>I2i4BHd', 258, -2, 7, 65535, 1.5); local r = (function() {HEX} end)(); return {{r, struct.size('>I2i4BHd')}}"),
        "*2\r\n$34\r\n0102fffffffe07ffff3ff8000000000000\r\n:17\r\n",
    );
    eval_is(
        &mut p,
        "return {struct.unpack('<i2s', struct.pack('<i2s', -3, 'hi'))}",
        "*3\r\n:-3\r\n$2\r\nhi\r\n:6\r\n",
    );
    for format in [
        "struct.pack('<I4', 1)",
        "struct.pack('>l', -1)",
        "struct.pack('<f', 0.5)",
        "struct.pack('!4 b i', 1, 2)",
        "struct.pack('c3', 'abcdef')",
        "struct.pack('c0', 'abc')",
        "struct.pack('>i17', 1)",
        "struct.pack('x')",
    ] {
        eval(
            &mut p,
            &format!("local s = {format}; return (function() {HEX} end)()"),
            &[],
            &[],
        );
    }
    eval(
        &mut p,
        "return {struct.unpack('>I4', '\\0\\0\\1\\0')}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {struct.unpack('<h', '\\255\\255')}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {struct.unpack('i4', struct.pack('i4', 7), 1)}",
        &[],
        &[],
    );
    eval(&mut p, "return {struct.unpack('c2c1', 'abc')}", &[], &[]);
    eval(&mut p, "return {struct.unpack('bc0', '\\3abcd')}", &[], &[]);
    eval(
        &mut p,
        "return tostring(struct.unpack('>d', struct.pack('>d', 0.1)))",
        &[],
        &[],
    );
    eval(&mut p, "return struct.size('i4i8')", &[], &[]);
    eval_err(
        &mut p,
        "return {struct.unpack('>I4', 'ab')}",
        "ERR user_script:1: bad argument #2 to 'unpack' (data string too short)",
        1,
    );
    eval_err(
        &mut p,
        "return struct.pack('q')",
        "ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'q')",
        1,
    );
    eval(&mut p, "return struct.pack('i', 'x')", &[], &[]);
    eval(&mut p, "return struct.pack()", &[], &[]);
    eval(&mut p, "return struct.size('s')", &[], &[]);
}

#[test]
fn cmsgpack_library() {
    let mut p = Pair::new();
    eval_is(
        &mut p,
        &format!("local s = cmsgpack.pack(0.1); {HEX}"),
        "$18\r\ncb3fb999999999999a\r\n",
    );
    eval_is(
        &mut p,
        &format!("local s = cmsgpack.pack(-1099511627776); {HEX}"),
        "$18\r\nd3ffffff0000000000\r\n",
    );
    eval_is(
        &mut p,
        &format!(
            "local s = cmsgpack.pack({{1,2,3}}, 'x', {{a=1}}, true, nil, 1.5, -1, 2^40); {HEX}"
        ),
        "$54\r\n93010203a17881a16101c3c0ca3fc00000ffcf0000010000000000\r\n",
    );
    for value in [
        "0",
        "127",
        "128",
        "255",
        "256",
        "65535",
        "65536",
        "2^32",
        "-1",
        "-32",
        "-33",
        "-128",
        "-129",
        "-32768",
        "-32769",
        "-2^31",
        "-2^31-1",
        "1e300",
        "false",
        "''",
        "string.rep('x', 31)",
        "string.rep('x', 32)",
        "string.rep('x', 256)",
        "{}",
        "{1,nil,3}",
        "{[1]=1,[3]=3}",
        "{a={b={c={}}}}",
    ] {
        eval(
            &mut p,
            &format!("local s = cmsgpack.pack({value}); {HEX}"),
            &[],
            &[],
        );
    }
    eval_is(
        &mut p,
        "local a = {cmsgpack.unpack(cmsgpack.pack(1, 'x', {1,2}, true, -5, 300, 70000))}; return {#a, a[1], a[2], a[3][2], a[4], a[5], a[6], a[7]}",
        "*8\r\n:7\r\n:1\r\n$1\r\nx\r\n:2\r\n:1\r\n:-5\r\n:300\r\n:70000\r\n",
    );
    eval(
        &mut p,
        "local t = cmsgpack.unpack(cmsgpack.pack({a=1, b={1,2,'x'}})); return {t.a, t.b[3]}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {cmsgpack.unpack_one(cmsgpack.pack(1,2), 0)}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2)}",
        &[],
        &[],
    );
    eval(
        &mut p,
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 1, 1)}",
        &[],
        &[],
    );
    eval(&mut p, "return {cmsgpack.unpack('\\193')}", &[], &[]);
    eval(&mut p, "return {cmsgpack.unpack('\\146\\1')}", &[], &[]);
    eval(&mut p, "return {cmsgpack.unpack('')}", &[], &[]);
    eval(
        &mut p,
        "return tostring(cmsgpack.unpack('\\203\\63\\185\\153\\153\\153\\153\\153\\154'))",
        &[],
        &[],
    );
    eval_err(
        &mut p,
        "return cmsgpack.unpack()",
        "ERR user_script:1: bad argument #1 to 'unpack' (string expected, got no value)",
        1,
    );
    eval_err(
        &mut p,
        "return cmsgpack.pack()",
        "ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.)",
        1,
    );
    // Circular references are cut at a depth of 16.
    eval(
        &mut p,
        &format!("local a = {{x=nil,y=5}}; local b = {{x=a}}; a['x'] = b; local s = cmsgpack.pack(a); {HEX}"),
        &[],
        &[],
    );
}

// ---------------------------------------------------------------------
// Interaction with transactions, databases and the keyspace
// ---------------------------------------------------------------------

#[test]
fn scripts_inside_multi_exec() {
    both_protocols(|p| {
        p.script(
            "MULTI
            EVAL \"return redis.call('incr', KEYS[1])\" 1 c
            EVAL \"return redis.call('nosuch')\" 0
            EVAL \"return 1\" -1
            EVALSHA 0000000000000000000000000000000000000000 0
            EVAL \"return {1, 'a', {ok='fine'}, {err='E x'}}\" 0
            SCRIPT LOAD \"return 'in multi'\"
            EVAL_RO \"return redis.call('get', KEYS[1])\" 1 c
            EXEC
            GET c",
        );
        // Arity errors abort the transaction at EXEC.
        p.script(
            "MULTI
            EVAL \"return 1\"
            EXEC",
        );
        // A script queued after SCRIPT LOAD in the same transaction.
        p.script(
            "MULTI
            SCRIPT LOAD \"return 'loaded in multi'\"
            EVALSHA 7c97ee7f1e7e6ed4ce8d2dd4b0d4e8a2b5a4d0e6 0
            EXEC",
        );
        let digest = sha("return 'later'");
        p.check(&["MULTI"]);
        p.check(&["SCRIPT", "LOAD", "return 'later'"]);
        p.check(&["EVALSHA", &digest, "0"]);
        p.check(&["EXEC"]);
        // Scripts do not see WATCH invalidations of their own transaction.
        p.script(
            "WATCH w
            EVAL \"return redis.call('set', 'w', '1')\" 0
            MULTI
            GET w
            EXEC",
        );
    });
}

#[test]
fn select_inside_a_script_does_not_change_the_callers_db() {
    both_protocols(|p| {
        p.check(&["SELECT", "0"]);
        p.check(&["SET", "k", "db0"]);
        eval_is(
            p,
            "redis.call('select', 1); redis.call('set', 'k', 'db1'); return redis.call('get','k')",
            "$3\r\ndb1\r\n",
        );
        check_is(p, &["GET", "k"], "$3\r\ndb0\r\n");
        p.check(&["SELECT", "1"]);
        p.check(&["GET", "k"]);
        // The script starts in the caller's database.
        eval(p, "return redis.call('get', 'k')", &[], &[]);
        p.check(&["SET", "mykey", "this is DB 1"]);
        eval(p, "return redis.pcall('select','9')", &[], &[]);
        p.check(&["GET", "mykey"]);
        p.check(&["SELECT", "0"]);
        eval(p, "return redis.call('get', 'k')", &[], &[]);
        eval(
            p,
            "redis.call('select', 2); redis.call('set', 'x', 'in2'); redis.call('select', 3); \
             redis.call('set', 'x', 'in3'); return redis.call('dbsize')",
            &[],
            &[],
        );
        p.check(&["DBSIZE"]);
        p.check(&["SELECT", "2"]);
        p.check(&["GET", "x"]);
        p.check(&["SELECT", "3"]);
        p.check(&["GET", "x"]);
        p.check(&["SELECT", "0"]);
        eval(p, "return redis.call('select', 'x')", &[], &[]);
        eval(p, "return redis.call('select', 16)", &[], &[]);
        // SWAPDB and MOVE from a script.
        eval(p, "return redis.call('move', 'k', 5)", &[], &[]);
        p.check(&["EXISTS", "k"]);
    });
}

#[test]
fn writes_before_an_error_are_kept() {
    both_protocols(|p| {
        eval_err(
            p,
            "redis.call('set','w','1'); redis.call('incr','w'); error('boom')",
            "ERR user_script:1: boom",
            1,
        );
        check_is(p, &["GET", "w"], "$1\r\n2\r\n");
        eval_err(
            p,
            "redis.call('set','w2','1'); return redis.call('nosuch')",
            "ERR Unknown Redis command called from script",
            1,
        );
        p.check(&["GET", "w2"]);
        eval(
            p,
            "redis.call('rpush','l','a'); redis.call('incr','l')",
            &[],
            &[],
        );
        p.check(&["LRANGE", "l", "0", "-1"]);
        // An error reply returned (not raised) after a write.
        eval(
            p,
            "redis.call('set','w3','x'); return {err='ERR returned'}",
            &[],
            &[],
        );
        p.check(&["GET", "w3"]);
        // The same script twice (issue: "Before the replica connects").
        let script = "redis.call('incr',KEYS[1]); redis.call('nonexisting')";
        eval(p, script, &["x"], &[]);
        p.check(&["EVALSHA", &sha(script), "1", "x"]);
        eval(p, "return redis.call('incr',KEYS[1])", &["x"], &[]);
    });
}

#[test]
fn keyspace_effects_are_visible_after_the_script() {
    both_protocols(|p| {
        let decr_if_gt = "local current
            current = redis.call('get',KEYS[1])
            if not current then return nil end
            if current > ARGV[1] then
                return redis.call('decr',KEYS[1])
            else
                return redis.call('get',KEYS[1])
            end";
        p.check(&["SET", "foo", "5"]);
        for _ in 0..5 {
            eval(p, decr_if_gt, &["foo"], &["2"]);
        }
        check_is(p, &["GET", "foo"], "$1\r\n2\r\n");
        eval(p, decr_if_gt, &["nokey"], &["2"]);
        // Every data type written by a script.
        eval(
            p,
            "redis.call('hset','h','a','1','b','2'); redis.call('sadd','s','x','y'); \
             redis.call('zadd','z',1,'m'); redis.call('rpush','l','1','2'); \
             redis.call('xadd','st','1-1','f','v'); redis.call('set','str','v','PX',100000); \
             return redis.call('dbsize')",
            &[],
            &[],
        );
        p.script(
            "HGETALL h
            ~SMEMBERS s
            ZRANGE z 0 -1 WITHSCORES
            LRANGE l 0 -1
            XRANGE st - +
            GET str
            TYPE st
            DBSIZE",
        );
        let (r, h) = p.both(&["PTTL", "str"]);
        let ttl = |b: &[u8]| -> i64 {
            std::str::from_utf8(&b[1..b.len() - 2])
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(-100)
        };
        assert!(
            ttl(&r) > 90000 && ttl(&h) > 90000,
            "{} {}",
            show(&r),
            show(&h)
        );
        // Deletions and expirations from a script.
        eval(
            p,
            "redis.call('del','h'); redis.call('expire','s',0); return {redis.call('exists','h'), redis.call('exists','s')}",
            &[],
            &[],
        );
        p.check(&["EXISTS", "h", "s"]);
        // Reused argument vectors (issue #1939).
        eval(
            p,
            "for i = 0, 10 do redis.call('SET', 'a{t}', '1'); redis.call('MGET', 'a{t}', 'b{t}', 'c{t}'); \
             redis.call('EXPIRE', 'a{t}', 0); redis.call('GET', 'a{t}'); redis.call('MGET', 'a{t}', 'b{t}', 'c{t}') end",
            &["a{t}", "b{t}", "c{t}"],
            &[],
        );
        p.check(&["EXISTS", "a{t}"]);
        // A key with a TTL read and deleted by a script.
        p.check(&["SET", "key", "value", "EX", "10"]);
        eval(
            p,
            "if redis.call('EXISTS', 'key') then return redis.call('GET', 'key') else return redis.call('EXISTS', 'key') end",
            &[],
            &[],
        );
        eval(
            p,
            "redis.call('DEL', 'key'); return redis.call('EXISTS', 'key')",
            &[],
            &[],
        );
        // SPOP / INCRBYFLOAT / GETEX-style commands inside scripts.
        p.check(&["SADD", "myset", "a"]);
        eval(p, "return redis.call('spop', 'myset')", &[], &[]);
        eval(p, "return redis.call('spop', KEYS[1])", &["myset"], &[]);
        eval(
            p,
            "return redis.call('incrbyfloat', KEYS[1], 1.5)",
            &["fl"],
            &[],
        );
        eval(
            p,
            "redis.call('set', KEYS[1], '1', 'KEEPTTL'); return redis.call('get', KEYS[1])",
            &["fl"],
            &[],
        );
    });
}

/// Sends raw `request` bytes on a new connection to `port` and reads until
/// the received bytes end with `terminator` (or 10 s pass): for replies too
/// deeply nested for the harness's frame parser.
fn raw_exchange(port: u16, request: &[u8], terminator: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .expect("timeout");
    stream.write_all(request).expect("write request");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut received = Vec::new();
    let mut chunk = [0u8; 65536];
    while !received.ends_with(terminator) && std::time::Instant::now() < deadline {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    received
}

#[test]
fn self_referencing_tables_end_at_the_lua_stack_limit() {
    // The reply nests arrays of one element until Lua's stack is exhausted,
    // then ends with an error element; the connection stays usable.
    let p = Pair::new();
    let request = crate::harness::encode_command(&[
        b"EVAL",
        b"local a = {}; local b = {a}; a[1] = b; return a",
        b"0",
    ]);
    let terminator = b"-ERR reached lua stack limit\r\n";
    let r = raw_exchange(p.redis_server.port, &request, terminator);
    let h = raw_exchange(p.hozon_server.port, &request, terminator);
    let tail = |b: &[u8]| show(&b[b.len().saturating_sub(60)..]);
    assert!(
        r == h,
        "replies differ: redis {} bytes ending {}, hozon {} bytes ending {}",
        r.len(),
        tail(&r),
        h.len(),
        tail(&h)
    );
    assert!(r.starts_with(b"*1\r\n*1\r\n") && r.ends_with(terminator));
}

#[test]
fn nested_tables_and_unreturned_cycles() {
    let mut p = Pair::new();
    eval(
        &mut p,
        "local a = {}; local b = {a}; a[1] = b; return 1",
        &[],
        &[],
    );
    eval(
        &mut p,
        "local t = 'leaf'; for i = 1, 100 do t = {t} end; return t",
        &[],
        &[],
    );
    p.check(&["PING"]);
}

#[test]
fn scripts_calling_scripting_commands_are_refused() {
    both_protocols(|p| {
        eval_err(
            p,
            "return redis.call('eval','return 1','0')",
            "ERR This Redis command is not allowed from script",
            1,
        );
        eval_is(
            p,
            "return redis.pcall('evalsha', redis.sha1hex('return 1'), 0)",
            "-ERR This Redis command is not allowed from script\r\n",
        );
        eval(p, "return redis.pcall('script', 'kill')", &[], &[]);
    });
}

#[test]
fn shebang_lines() {
    let mut p = Pair::new();
    eval_is(&mut p, "#!lua\nreturn 1", ":1\r\n");
    eval_is(
        &mut p,
        "#!not-lua\nreturn 1",
        "-ERR Unexpected engine in script shebang: #!not-lua\r\n",
    );
    eval_is(
        &mut p,
        "#!lua badger=data\nreturn 1",
        "-ERR Unknown lua shebang option: badger=data\r\n",
    );
    eval_is(
        &mut p,
        "#!lua flags=allow-oom,what?\nreturn 1",
        "-ERR Unexpected flag in script shebang: what?\r\n",
    );
    eval_err(
        &mut p,
        "#!lua flags=no-writes\nreturn redis.call('set','x','1')",
        "ERR Write commands are not allowed from read-only scripts.",
        2,
    );
    eval(
        &mut p,
        "#!lua flags=no-writes\nreturn redis.call('get','x')",
        &[],
        &[],
    );
    eval(
        &mut p,
        "#!lua flags=no-writes,allow-stale\nreturn 2",
        &[],
        &[],
    );
    eval(&mut p, "#!lua name=x\nreturn 2", &[], &[]);
    eval(
        &mut p,
        "#!lua\nreturn redis.call('set','x','y')",
        &["x"],
        &[],
    );
    p.check(&["GET", "x"]);
    p.check(&["SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 'ro'"]);
    p.check(&[
        "EVALSHA_RO",
        &sha("#!lua flags=no-writes\nreturn 'ro'"),
        "0",
    ]);
    p.check(&["SCRIPT", "LOAD", "#!bad\nreturn 1"]);
}
