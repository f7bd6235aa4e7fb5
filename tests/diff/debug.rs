//! Differential tests: DEBUG (the subcommands tools and Redis's tests use)
//! and `enable-debug-command`, RESP2 and RESP3.
//!
//! DEBUG DIGEST is Redis's exact dataset signature, so the same data must
//! give the same digest in both servers: the digest tests also check that
//! every type's logical contents (list order, set and hash members,
//! sorted-set scores as `%.17g`, stream entries, TTLs, database numbers)
//! are what Redis holds.

use crate::harness::{test_seed, Pair};

const DEBUG_ON: &[&str] = &["--enable-debug-command", "yes"];

fn pair() -> Pair {
    Pair::with_args(DEBUG_ON, DEBUG_ON)
}

/// A dataset of every type and encoding, written to both servers.
const DATASET: &str = r#"
SET s hello
SET n 12345
SET neg -7
SET empty ""
SET bin "a\x00b\xff"
APPEND grown more
SETRANGE grown 10 x
RPUSH l a b c 1 2 3 "" "x y"
LPUSH l head
SADD si 3 1 2 -5 100000
SADD ss a b c "" "sp ace"
ZADD z 1 a 2.5 b -inf c 0.1 d 1e300 e 3 f
CONFIG SET zset-max-listpack-entries 2
ZADD zbig 1 a 2 b 3 c 4.000001 d -0.5 e
HSET h f v f2 v2 n 1
CONFIG SET hash-max-listpack-entries 2
HSET hbig a 1 b 2 c 3 d 4
XADD st 1-1 a 1 b 2
XADD st 2-0 c 3
XADD st 3-5 "" ""
XDEL st 2-0
XGROUP CREATE st g 0
SET e v EX 100000
HSET he x y
PEXPIREAT he 99999999999999
SELECT 3
SET other db
RPUSH l3 z
SELECT 0
"#;

#[test]
fn digest_of_every_type_matches_redis() {
    let mut p = pair();
    p.check(&["DEBUG", "DIGEST"]);
    p.script(DATASET);
    p.check(&["DEBUG", "DIGEST"]);
    p.check(&[
        "DEBUG",
        "DIGEST-VALUE",
        "s",
        "n",
        "neg",
        "empty",
        "bin",
        "grown",
        "l",
        "si",
        "ss",
        "z",
        "zbig",
        "h",
        "hbig",
        "st",
        "e",
        "he",
        "missing",
    ]);
    p.check(&["DEBUG", "DIGEST-VALUE"]);
    // The database number is part of the digest.
    p.script("SELECT 3\nMOVE other 4\nSELECT 0\nDEBUG DIGEST");
    // Changing anything changes it the same way.
    p.script("PERSIST e\nDEBUG DIGEST\nLSET l 0 HEAD\nDEBUG DIGEST\nZINCRBY z 0.5 a\nDEBUG DIGEST");
    p.resp3();
    p.check(&["DEBUG", "DIGEST"]);
    p.check(&["DEBUG", "DIGEST-VALUE", "z", "nope"]);
}

/// Random writes of every type, then the digests compared: catches any
/// difference in what the two servers hold, not only in what they reply.
#[test]
fn digest_after_random_writes_matches_redis() {
    let mut p = pair();
    let mut state = test_seed() | 1;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for round in 0..6 {
        for _ in 0..150 {
            let key = format!("k{}", next(12));
            let member = format!("m{}", next(30));
            let num = format!("{}", next(2000) as i64 - 1000);
            let score = format!("{}.{}", next(100), next(1000));
            let cmd: Vec<String> = match next(11) {
                0 => vec!["SET".into(), key, member],
                1 => vec!["RPUSH".into(), key, member, num],
                2 => vec!["LPUSH".into(), key, num],
                3 => vec!["SADD".into(), key, num, member],
                4 => vec!["SREM".into(), key, member],
                5 => vec!["ZADD".into(), key, score, member],
                6 => vec!["HSET".into(), key, member, num],
                7 => vec!["XADD".into(), key, "*".into(), member, num],
                8 => vec!["EXPIRE".into(), key, "10000".into()],
                9 => vec!["DEL".into(), key],
                _ => vec!["INCRBY".into(), key, num],
            };
            let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
            let (r, h) = p.both(&refs);
            // XADD * makes different IDs in the two servers: such streams
            // are compared by their entries below, not by digest.
            if cmd[0] != "XADD" {
                assert_eq!(
                    r,
                    h,
                    "replies differ for {cmd:?}: redis {} hozon {}",
                    crate::harness::show(&r),
                    crate::harness::show(&h)
                );
            }
        }
        // Streams made with `*` IDs differ by construction: drop them.
        for k in 0..12 {
            let key = format!("k{k}");
            let (r, _) = p.both(&["TYPE", &key]);
            if r == b"+stream\r\n" {
                p.check(&["DEL", &key]);
            }
        }
        let (r, h) = p.both(&["DEBUG", "DIGEST"]);
        assert_eq!(
            crate::harness::show(&r),
            crate::harness::show(&h),
            "digest after round {round}"
        );
    }
}

#[test]
fn populate_matches_redis() {
    let mut p = pair();
    p.script(
        r#"
DEBUG POPULATE 0
DEBUG POPULATE 100
DBSIZE
GET key:0
GET key:99
DEBUG DIGEST
SET pre:5 mine
DEBUG POPULATE 10 pre
GET pre:5
GET pre:6
DEBUG POPULATE 5 sized 3
GET sized:4
DEBUG POPULATE 5 padded 12
GET padded:1
STRLEN padded:1
DEBUG POPULATE 3 pre 0
DEBUG DIGEST
DEBUG POPULATE -1
DEBUG POPULATE abc
DEBUG POPULATE 1 p -1
DEBUG POPULATE 1 p x
DEBUG POPULATE 1 a b c
"#,
    );
}

/// A script reading DEBUG PROTOCOL's replies under RESP3 gets what Redis's
/// Lua conversion gives (the attribute skipped, the reply after it read).
#[test]
fn protocol_replies_seen_by_scripts_match_redis() {
    let mut p = pair();
    // DEBUG is `noscript`: allowed in scripts only with this switch.
    p.check(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]);
    for t in [
        "attrib", "string", "integer", "double", "bignum", "null", "array", "set", "map",
        "verbatim", "true", "false",
    ] {
        for resp in ["2", "3"] {
            let script =
                format!("redis.setresp({resp}); return redis.call('debug', 'protocol', '{t}')");
            p.check(&["EVAL", &script, "0"]);
        }
    }
}

#[test]
fn protocol_replies_match_redis_in_both_protocols() {
    let mut p = pair();
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "nope", "STRING",
    ];
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        for t in types {
            p.check(&["DEBUG", "PROTOCOL", t]);
            // A PING after each keeps the two streams in step (push and
            // attribute replies come with a second frame).
            p.check(&["PING"]);
        }
    }
}

#[test]
fn switches_and_errors_match_redis() {
    let mut p = pair();
    p.script(
        r#"
DEBUG SLEEP 0
DEBUG SLEEP 0.01
DEBUG SLEEP abc
DEBUG SET-ACTIVE-EXPIRE 1
DEBUG SET-DISABLE-DENY-SCRIPTS 0
DEBUG SET-SKIP-CHECKSUM-VALIDATION 0
DEBUG PAUSE-CRON 0
DEBUG QUICKLIST-PACKED-THRESHOLD 100
DEBUG QUICKLIST-PACKED-THRESHOLD 1
DEBUG QUICKLIST-PACKED-THRESHOLD 5gb
DEBUG QUICKLIST-PACKED-THRESHOLD x
DEBUG LOG hello
DEBUG ERROR "FOO bar"
DEBUG ERROR "multi\nline"
DEBUG OBJECT missing
DEBUG RELOAD WHATEVER
DEBUG NOSUCHTHING
DEBUG SLEEP
DEBUG SLEEP 1 2
DEBUG DIGEST extra
DEBUG OBJECT
DEBUG PROTOCOL
"#,
    );
}

/// With active expiry off, an expired key stays until something touches
/// it, in both servers.
#[test]
fn set_active_expire_off_keeps_expired_keys_until_touched() {
    let mut p = pair();
    p.script("DEBUG SET-ACTIVE-EXPIRE 0\nSET a 1 PX 1\nSET b 1 PX 1\nSET c 1");
    std::thread::sleep(std::time::Duration::from_millis(400));
    p.script("DBSIZE\nGET a\nDBSIZE\nDEBUG SET-ACTIVE-EXPIRE 1");
    // Back on: the cron removes b eventually (both servers).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (r, h) = p.both(&["DBSIZE"]);
        if r == b":1\r\n" && h == b":1\r\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "b was not expired by the cron: redis {r:?} hozon {h:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// RESTORE of a payload with a wrong CRC is refused, and accepted once
/// checksum validation is off.
#[test]
fn skip_checksum_validation_matches_redis() {
    let mut p = pair();
    p.check(&["SET", "src", "value"]);
    let (dump, _) = p.both(&["DUMP", "src"]);
    // The bulk's payload, its last byte (part of the CRC) flipped.
    let start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut payload = dump[start..dump.len() - 2].to_vec();
    *payload.last_mut().unwrap() ^= 0xff;
    p.check_bytes(&[b"RESTORE", b"dst", b"0", &payload]);
    p.check(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]);
    p.check_bytes(&[b"RESTORE", b"dst", b"0", &payload]);
    p.check(&["GET", "dst"]);
}

/// A script may call a `noscript` command once deny-scripts is disabled.
#[test]
fn disable_deny_scripts_matches_redis() {
    let mut p = pair();
    let script = "return redis.call('debug', 'digest')";
    p.check(&["EVAL", script, "0"]);
    p.check(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]);
    p.check(&["EVAL", script, "0"]);
}

#[test]
fn object_line_has_redis_fields() {
    let mut p = pair();
    p.script("SET n 42\nSET s hello\nRPUSH l a b\nSADD si 1 2");
    for key in ["n", "s", "l", "si"] {
        let (r, h) = p.both(&["DEBUG", "OBJECT", key]);
        let mask = |reply: &[u8]| {
            // Value at:<address> … lru:<clock> lru_seconds_idle:<n>
            String::from_utf8_lossy(reply)
                .split(' ')
                .filter(|w| !w.starts_with("at:") && !w.starts_with("lru"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let (r, h) = (mask(&r), mask(&h));
        // refcount and encoding must match; the serialized length too for
        // these small values (the same RDB encoding).
        assert_eq!(r, h, "DEBUG OBJECT {key}");
    }
}

#[test]
fn reload_keeps_the_data_in_both_snapshot_formats() {
    for format in ["native", "rdb"] {
        let mut p = Pair::with_args(
            DEBUG_ON,
            &["--enable-debug-command", "yes", "--snapshot-format", format],
        );
        p.script(DATASET);
        let (before, _) = p.both(&["DEBUG", "DIGEST"]);
        p.check(&["DEBUG", "RELOAD"]);
        p.check(&["DEBUG", "DIGEST"]);
        let (after, _) = p.both(&["DEBUG", "DIGEST"]);
        assert_eq!(before, after, "{format}: the digest changed");
        // NOSAVE loads the file as it is: what came after is gone.
        p.script(
            r##"
SET later 1
DEBUG RELOAD NOSAVE
EXISTS later
DEBUG DIGEST
SET later 2
SET s changed
DEBUG RELOAD NOSAVE NOFLUSH MERGE
GET later
GET s
DEBUG DIGEST
FUNCTION LOAD "#!lua name=lib\nredis.register_function('f', function() return 1 end)"
DEBUG RELOAD
FCALL f 0
FUNCTION LIST
"##,
        );
    }
}

/// `enable-debug-command no` (the default) refuses DEBUG before anything
/// else, as Redis does; `local` allows a loopback client.
#[test]
fn enable_debug_command_matches_redis() {
    let mut p = Pair::new();
    p.check(&["DEBUG", "DIGEST"]);
    p.check(&["DEBUG", "HELP"]);
    p.check(&["DEBUG"]);
    p.check(&["CONFIG", "GET", "enable-debug-command"]);
    p.check(&["CONFIG", "SET", "enable-debug-command", "yes"]);
    p.check(&["MULTI"]);
    p.check(&["DEBUG", "DIGEST"]);
    p.check(&["EXEC"]);
    let local = ["--enable-debug-command", "local"];
    let mut p = Pair::with_args(&local, &local);
    p.check(&["DEBUG", "DIGEST"]);
    p.check(&["CONFIG", "GET", "enable-debug-command"]);
}
