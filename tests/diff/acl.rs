//! Differential tests: ACL users against redis-server — the rule language
//! (SETUSER and its errors), how users are described (ACL LIST, GETUSER:
//! the `+@all`/`-@all` start, the categories that fit best, then single
//! commands), AUTH/HELLO/RESET as a user, NOPERM for commands, keys and
//! channels (selectors, first arguments, MULTI/EXEC when the rules change
//! meanwhile), DRYRUN, CAT, GENPASS, deleting a user, requirepass.
//!
//! Redis lists the single-command rules that end a description in the
//! order of its command dictionary, which is seeded at random per process:
//! those runs are compared as sets (`normalize`), everything else byte for
//! byte.

use quickcheck::{Arbitrary, Gen, TestResult};
use testkit::harness::{quickcheck_ops, show, split_line, with_thread_pair, Conn, Pair};

/// A rule naming one command (`+get`, `-config|set`, `+select|0`).
fn single_command_rule(token: &[u8]) -> bool {
    matches!(token.first(), Some(b'+' | b'-')) && !token.contains(&b'@')
}

/// `bytes` with every run of single-command rules sorted (a RESP reply or
/// a line of text; sorting within a line keeps the RESP framing intact).
pub(crate) fn normalize(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        let (body, cr) = match line.strip_suffix(b"\r") {
            Some(body) => (body, true),
            None => (line, false),
        };
        let mut tokens: Vec<Vec<u8>> = Vec::new();
        for token in body.split(|&b| b == b' ') {
            // `+set)` ends a selector: the parenthesis stays in place.
            match token.strip_suffix(b")") {
                Some(inner) if single_command_rule(inner) => {
                    tokens.push(inner.to_vec());
                    tokens.push(b")".to_vec());
                }
                _ => tokens.push(token.to_vec()),
            }
        }
        let mut start = 0;
        while start < tokens.len() {
            if !single_command_rule(&tokens[start]) {
                start += 1;
                continue;
            }
            let mut end = start;
            while end < tokens.len() && single_command_rule(&tokens[end]) {
                end += 1;
            }
            tokens[start..end].sort();
            start = end;
        }
        let mut joined: Vec<u8> = Vec::new();
        for (j, t) in tokens.iter().enumerate() {
            if j > 0 && t.as_slice() != b")" {
                joined.push(b' ');
            }
            joined.extend_from_slice(t);
        }
        out.extend_from_slice(&joined);
        if cr {
            out.push(b'\r');
        }
    }
    out
}

/// Sends `line` (redis-cli quoting) to both servers; the replies must be
/// equal once their single-command runs are sorted.
#[track_caller]
pub(crate) fn check_described(p: &mut Pair, line: &str) {
    let args = split_line(line);
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let (r, h) = p.both_bytes(&refs);
    assert_eq!(
        show(&normalize(&r)),
        show(&normalize(&h)),
        "replies differ for {line:?}\n  redis: {}\n  hozon: {}",
        show(&r),
        show(&h)
    );
}

/// ACL LIST and ACL GETUSER of every user, in RESP2 and RESP3.
#[track_caller]
pub(crate) fn check_users(p: &mut Pair) {
    check_described(p, "ACL LIST");
    let names = p.check(&["ACL", "USERS"]);
    let names = testkit::value::decode(&names);
    for name in names.items() {
        let line = format!("ACL GETUSER {}", name.text());
        check_described(p, &line);
        p.resp3();
        check_described(p, &line);
        p.r.call(&[b"HELLO", b"2"]);
        p.h.call(&[b"HELLO", b"2"]);
    }
}

#[test]
fn normalize_sorts_only_single_command_runs() {
    assert_eq!(
        normalize(b"user a on ~k* -@all +@hash +get -hdel (~x* -@all +set +del)"),
        b"user a on ~k* -@all +@hash +get -hdel (~x* -@all +del +set)".to_vec()
    );
    assert_eq!(
        normalize(b"$12\r\n-@all +b +a\r\n"),
        b"$12\r\n-@all +a +b\r\n".to_vec()
    );
}

#[test]
fn setuser_rules_and_their_errors() {
    let mut p = Pair::new();
    p.script(
        r#"
ACL SETUSER bob
ACL SETUSER bob on >pw ~foo* %R~bar* %W~baz* %RW~qux* +get +@hash -hdel &chan* +select|0 +config|get
ACL SETUSER bob (~x* +set) (%R~y* +@read -@list)
ACL SETUSER bob >pw >other <other #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4
ACL SETUSER carol +@all -@dangerous -flushall ~* allchannels
ACL SETUSER dave nocommands allcommands -debug resetkeys allkeys resetchannels &a &b &a
ACL SETUSER erin reset on nopass skip-sanitize-payload +client|list +client|kill
ACL SETUSER erin sanitize-payload resetpass >x clearselectors (+ping)
ACL SETUSER frank on (~x  +get) ( ~y +set )
ACL SETUSER grace %R~a %W~a ~b %R~b
ACL SETUSER bad %Q~z
ACL SETUSER bad %R
ACL SETUSER bad (~x +get
ACL SETUSER bad +nosuch
ACL SETUSER bad -nosuch
ACL SETUSER bad +@nosuch
ACL SETUSER bad -@nosuch
ACL SETUSER bad ~* ~a
ACL SETUSER bad &* &a
ACL SETUSER bad #abc
ACL SETUSER bad !30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4
ACL SETUSER bad <nopw
ACL SETUSER bad +config|get|x
ACL SETUSER bad +get|
ACL SETUSER bad ~a\x20b
ACL SETUSER bad whatever
ACL SETUSER "a b"
ACL SETUSER bob off ~ok +nosuch
ACL SETUSER
ACL GETUSER nosuch
ACL GETUSER
ACL DELUSER default
ACL DELUSER bob default
ACL DELUSER nosuch
ACL WHOAMI
ACL WHOAMI extra
ACL USERS
ACL LIST extra
ACL NOSUCH
ACL
"#,
    );
    check_users(&mut p);
    p.script("ACL DELUSER frank grace nosuch\nACL USERS");
    check_users(&mut p);
}

#[test]
fn descriptions_pick_the_same_categories() {
    let mut p = Pair::new();
    let cases = [
        "+@read -@hash +@write",
        "+@all -@dangerous -@admin +config|get",
        "-@all +@string +@list -lpush +@fast",
        "+@all -@slow",
        "-@all +@keyspace +@read +@write -del",
        "+@hash +@set +@sortedset -@write +hset",
        "+@all -@scripting -@pubsub +publish",
        "-@all +@connection +@transaction +@blocking",
        "+@geo +@bitmap +@hyperloglog +@stream -xadd",
        "+client -client|kill +config -config|set +acl|whoami",
        "+@all -client +client|list",
    ];
    for (i, rules) in cases.iter().enumerate() {
        let line = format!("ACL SETUSER u{i} {rules}");
        p.check_bytes(
            &split_line(&line)
                .iter()
                .map(Vec::as_slice)
                .collect::<Vec<_>>(),
        );
    }
    check_users(&mut p);
}

/// A random command or category rule.
#[derive(Debug, Clone)]
struct Rule(String);

impl Arbitrary for Rule {
    fn arbitrary(g: &mut Gen) -> Rule {
        const CATEGORIES: &[&str] = &[
            "keyspace",
            "read",
            "write",
            "set",
            "sortedset",
            "list",
            "hash",
            "string",
            "bitmap",
            "hyperloglog",
            "geo",
            "stream",
            "pubsub",
            "admin",
            "fast",
            "slow",
            "blocking",
            "dangerous",
            "connection",
            "transaction",
            "scripting",
            "all",
        ];
        const COMMANDS: &[&str] = &[
            "get",
            "set",
            "del",
            "hset",
            "hget",
            "lpush",
            "rpop",
            "zadd",
            "sadd",
            "config",
            "config|get",
            "config|set",
            "client",
            "client|list",
            "client|kill",
            "object|freq",
            "xinfo|stream",
            "publish",
            "subscribe",
            "eval",
            "multi",
            "exec",
            "flushall",
            "debug",
            "keys",
            "scan",
            "info",
            "ping",
            "acl|whoami",
            "acl",
            "function|load",
        ];
        let sign = if bool::arbitrary(g) { "+" } else { "-" };
        Rule(if u8::arbitrary(g) % 3 == 0 {
            format!("{sign}{}", g.choose(COMMANDS).expect("commands"))
        } else {
            format!("{sign}@{}", g.choose(CATEGORIES).expect("categories"))
        })
    }
}

fn random_rules_describe_alike(rules: Vec<Rule>) -> TestResult {
    with_thread_pair(false, |p| {
        let mut args: Vec<&[u8]> = vec![b"ACL", b"SETUSER", b"r", b"reset"];
        args.extend(rules.iter().map(|r| r.0.as_bytes()));
        let (r, h) = p.both_bytes(&args);
        if r != h {
            return TestResult::error(format!("SETUSER {rules:?}: {} / {}", show(&r), show(&h)));
        }
        let (r, h) = p.both_bytes(&[b"ACL", b"GETUSER", b"r"]);
        if normalize(&r) != normalize(&h) {
            return TestResult::error(format!(
                "GETUSER after {rules:?}\n  redis: {}\n  hozon: {}",
                show(&r),
                show(&h)
            ));
        }
        TestResult::passed()
    })
}

#[test]
fn random_rule_sequences_describe_alike() {
    quickcheck_ops(
        12,
        150,
        random_rules_describe_alike as fn(Vec<Rule>) -> TestResult,
    );
}

/// One connection to each server, authenticated as `user`/`password`.
pub(crate) fn login(p: &Pair, user: &str, password: &str) -> (Conn, Conn) {
    let (mut r, mut h) = p.connect_more();
    for c in [&mut r, &mut h] {
        let reply = c.call(&[b"AUTH", user.as_bytes(), password.as_bytes()]);
        assert_eq!(reply, b"+OK\r\n", "AUTH {user}: {}", show(&reply));
    }
    (r, h)
}

/// Runs `text` (one command per line) on the two connections; the replies
/// must be equal.
#[track_caller]
pub(crate) fn script_on(r: &mut Conn, h: &mut Conn, text: &str) {
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let (a, b) = (r.call(&refs), h.call(&refs));
        assert_eq!(show(&a), show(&b), "replies differ for {line:?}");
    }
}

#[test]
fn a_user_runs_only_what_its_rules_allow() {
    let mut p = Pair::new();
    p.script(
        r#"
ACL SETUSER bob on >pw ~foo* %R~bar* %W~baz* +get +set +@hash -hdel +select|0 +config|get +acl|whoami +client|list &chan* +publish +subscribe +psubscribe +multi +exec +copy
ACL SETUSER bob (~x* +set +del) (%R~y* +get)
SET bar1 v
SET y1 v
"#,
    );
    let (mut r, mut h) = login(&p, "bob", "pw");
    script_on(
        &mut r,
        &mut h,
        r#"
ACL WHOAMI
GET foo1
GET zzz
SET foo1 v
SET bar1 v
GET bar1
SET baz1 v
GET baz1
COPY bar1 baz2
COPY baz1 bar2
HSET foo2 a b
HDEL foo2 a
SELECT 0
SELECT 1
CONFIG GET maxmemory
CONFIG SET maxmemory 0
SET x1 v
DEL x1
DEL foo1
GET y1
GET x1
PUBLISH chan1 m
PUBLISH other m
PSUBSCRIBE chan*
"#,
    );
    // A fresh pair of connections: the subscription above changed modes.
    let (mut r, mut h) = login(&p, "bob", "pw");
    script_on(
        &mut r,
        &mut h,
        r#"
SUBSCRIBE chan1 other
"#,
    );
    let (mut r, mut h) = login(&p, "bob", "pw");
    script_on(
        &mut r,
        &mut h,
        r#"
MULTI
GET foo1
GET zzz
EXEC
MULTI
GET foo1
SET foo1 w
"#,
    );
    // The rules change between MULTI and EXEC.
    p.script("ACL SETUSER bob -set");
    script_on(&mut r, &mut h, "EXEC\nGET foo1");
    // Scripts run as the caller's user (Redis's scriptVerifyACL).
    p.script("ACL SETUSER bob +eval +fcall +function|load +set");
    let (mut r, mut h) = login(&p, "bob", "pw");
    script_on(
        &mut r,
        &mut h,
        r#"
EVAL "return redis.call('get', KEYS[1])" 1 foo1
EVAL "return redis.call('get', KEYS[1])" 1 zzz
EVAL "return redis.call('del', KEYS[1])" 1 foo1
EVAL "return redis.call('publish', 'other', 'm')" 0
EVAL "return redis.pcall('get', 'zzz')" 0
EVAL "return {redis.acl_check_cmd('get', 'foo1'), redis.acl_check_cmd('get', 'zzz'), redis.acl_check_cmd('del', 'x')}" 0
EVAL "return redis.acl_check_cmd('nosuch')" 0
"#,
    );
    p.script(
        r#"
ACL DRYRUN bob get foo1
ACL DRYRUN bob get zzz
ACL DRYRUN bob set x1 v
ACL DRYRUN bob set bar1 v
ACL DRYRUN bob publish chan1 m
ACL DRYRUN bob publish other m
ACL DRYRUN bob subscribe chan1 other
ACL DRYRUN bob psubscribe chan*
ACL DRYRUN bob select 0
ACL DRYRUN bob select 1
ACL DRYRUN bob config get x
ACL DRYRUN bob config set x y
ACL DRYRUN bob nosuch
ACL DRYRUN bob config nosuch
ACL DRYRUN nobody get x
ACL DRYRUN bob get
ACL DRYRUN bob hset foo1 a b c
"#,
    );
}

#[test]
fn auth_hello_reset_and_the_user_a_connection_runs_as() {
    let mut p = Pair::new();
    p.script(
        r#"
ACL SETUSER alice on >secret +@all ~*
ACL SETUSER off_user off >pw +@all
ACL SETUSER free on nopass +ping
AUTH alice wrong
AUTH nobody secret
AUTH off_user pw
AUTH free anything
ACL WHOAMI
AUTH alice secret
ACL WHOAMI
AUTH alice
AUTH a b c
AUTH default whatever
ACL WHOAMI
"#,
    );
    let (mut r, mut h) = p.connect_more();
    script_on(
        &mut r,
        &mut h,
        r#"
HELLO 2 AUTH alice wrong
ACL WHOAMI
"#,
    );
    // A successful HELLO answers with the connection's id, which differs.
    for c in [&mut r, &mut h] {
        let reply = c.call(&[b"HELLO", b"2", b"AUTH", b"free", b"x"]);
        assert_eq!(reply.first(), Some(&b'*'), "HELLO AUTH: {}", show(&reply));
    }
    script_on(
        &mut r,
        &mut h,
        r#"
ACL WHOAMI
RESET
ACL WHOAMI
"#,
    );
    // The default user gets a password: new connections must authenticate.
    p.script("CONFIG SET requirepass sesame");
    let (mut r, mut h) = p.connect_more();
    script_on(
        &mut r,
        &mut h,
        r#"
GET x
ACL WHOAMI
AUTH wrong
AUTH sesame
ACL WHOAMI
RESET
GET x
AUTH default sesame
"#,
    );
    check_users(&mut p);
    p.script("CONFIG SET requirepass \"\"");
    check_users(&mut p);
}

#[test]
fn deleting_a_user_closes_its_connections() {
    let mut p = Pair::new();
    p.script("ACL SETUSER gone on >pw +@all ~*\nACL SETUSER stays on >pw +@all ~*");
    let (mut gr, mut gh) = login(&p, "gone", "pw");
    let (mut sr, mut sh) = login(&p, "stays", "pw");
    script_on(&mut gr, &mut gh, "PING");
    p.script("~CLIENT KILL USER nosuch\nACL DELUSER gone nosuch");
    for c in [&mut gr, &mut gh] {
        assert!(
            c.try_call(&[b"PING"]).is_none(),
            "a deleted user's connection is closed"
        );
    }
    script_on(&mut sr, &mut sh, "PING\nACL WHOAMI");
    p.script("CLIENT KILL USER stays\nCLIENT KILL USER stays");
}

#[test]
fn acl_cat_genpass_and_help() {
    let mut p = Pair::new();
    p.script(
        r#"
ACL CAT
ACL CAT nosuch
ACL CAT read extra
ACL HELP
ACL HELP extra
ACL GENPASS 0
ACL GENPASS 4097
ACL GENPASS abc
ACL GENPASS 1 2
"#,
    );
    let cats = testkit::value::decode(&p.check(&["ACL", "CAT"]));
    for cat in cats.items() {
        p.check_unordered(&["ACL", "CAT", &cat.text()]);
        p.check_unordered(&["ACL", "CAT", &cat.text().to_uppercase()]);
    }
    for (bits, chars) in [
        (None, 64),
        (Some("1"), 1),
        (Some("5"), 2),
        (Some("4096"), 1024),
    ] {
        let mut args: Vec<&str> = vec!["ACL", "GENPASS"];
        args.extend(bits);
        let (r, h) = p.both(&args);
        for reply in [r, h] {
            let text = testkit::value::decode(&reply).text();
            assert_eq!(text.len(), chars, "{args:?}: {text}");
            assert!(text
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
    }
    let (a, b) = (p.hozon(&["ACL", "GENPASS"]), p.hozon(&["ACL", "GENPASS"]));
    assert_ne!(a, b, "two passwords differ");
}

/// ACL LOG's entries, each reduced to what both servers must agree on:
/// every field but `age-seconds` (checked to be a number) and
/// `client-info` (reduced to its `cmd=` and `user=` fields).
fn log_entries(conn: &mut Conn, args: &[&str]) -> Vec<Vec<(String, String)>> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let reply = testkit::value::decode(&conn.call(&args));
    reply
        .items()
        .iter()
        .map(|entry| {
            let fields = entry.items();
            assert_eq!(fields.len(), 14, "{entry:?}");
            fields
                .chunks(2)
                .map(|pair| {
                    let name = pair[0].text();
                    let value = match &pair[1] {
                        testkit::value::Value::Int(n) => n.to_string(),
                        other => other.text(),
                    };
                    let value = match name.as_str() {
                        "age-seconds" => {
                            let age: f64 = value.parse().expect("age is a number");
                            assert!((0.0..60.0).contains(&age), "{age}");
                            String::new()
                        }
                        "client-info" => value
                            .split(' ')
                            .filter(|f| f.starts_with("cmd=") || f.starts_with("user="))
                            .collect::<Vec<_>>()
                            .join(" "),
                        _ => value,
                    };
                    (name, value)
                })
                .collect()
        })
        .collect()
}

#[test]
fn acl_log_records_refusals_as_redis_does() {
    let mut p = Pair::new();
    p.script("ACL SETUSER bob on >pw +get ~foo* &ch +multi +exec +eval +auth +publish");
    let (mut r, mut h) = login(&p, "bob", "pw");
    script_on(
        &mut r,
        &mut h,
        r#"
GET zzz
GET zzz
SET foo1 v
GET foo1
PUBLISH other m
AUTH bob wrong
AUTH nobody x
MULTI
SET foo1 v
EXEC
EVAL "return redis.call('get', 'zzz')" 0
"#,
    );
    let (a, b) = (
        log_entries(&mut p.r, &["ACL", "LOG"]),
        log_entries(&mut p.h, &["ACL", "LOG"]),
    );
    assert_eq!(a, b, "ACL LOG");
    assert!(a.len() >= 5, "{a:?}");
    for args in [
        &["ACL", "LOG", "2"][..],
        &["ACL", "LOG", "-1"],
        &["ACL", "LOG", "0"],
    ] {
        assert_eq!(
            log_entries(&mut p.r, args),
            log_entries(&mut p.h, args),
            "{args:?}"
        );
    }
    p.script(
        r#"
ACL LOG abc
ACL LOG 1 2
CONFIG SET acllog-max-len 2
CONFIG GET acllog-max-len
"#,
    );
    script_on(&mut r, &mut h, "GET zzz1\nGET zzz2\nGET zzz3");
    assert_eq!(
        log_entries(&mut p.r, &["ACL", "LOG"]),
        log_entries(&mut p.h, &["ACL", "LOG"])
    );
    p.script("ACL LOG RESET\nACL LOG");
}

#[test]
fn sort_by_and_get_patterns_need_access_to_every_key() {
    let mut p = Pair::new();
    p.script(
        r#"
RPUSH foo:list 3 1 2
ACL SETUSER part on >pw +sort ~foo:*
ACL SETUSER all on >pw +sort %R~* %W~foo:*
ACL SETUSER writes on >pw +sort %W~*
"#,
    );
    for user in ["part", "all", "writes"] {
        let (mut r, mut h) = login(&p, user, "pw");
        script_on(
            &mut r,
            &mut h,
            r#"
SORT foo:list
SORT foo:list BY nosort
SORT foo:list BY w_*
SORT foo:list GET #
SORT foo:list BY w_* GET # STORE foo:out
"#,
        );
    }
}
