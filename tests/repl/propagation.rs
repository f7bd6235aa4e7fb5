//! What the stream holds for commands Redis propagates as something else,
//! unit by unit, against redis-server 7.0.15: a fake replica attached the
//! way Redis's own Tcl helper does (`repl-ping-replica-period 3600`, then a
//! full sync) reads the stream of a redis-server master and of a
//! hozon-server master running the same commands, and the two are compared
//! (timestamps and the order of keys Redis visits by hash made equal).
//!
//! Covered: ZMPOP/BZMPOP as ZPOPMIN/ZPOPMAX with a count, LMPOP/BLMPOP as
//! LPOP/RPOP with a count, the blocking pops and moves served at once or
//! after blocking, GETEX as PEXPIREAT/PERSIST/DEL, lazy-expiry DELs (bare
//! for a single one and for SCAN and RANDOMKEY, in MULTI/EXEC when a
//! command propagates more than one effect), no PING right after the
//! attach, the DEL of a ready key that expired before its blocked client
//! was served (SWAPDB, MULTI with DEBUG SLEEP), `REPLCONF
//! rdb-filter-only` (`redis-cli --replica` and `--functions-rdb`), the
//! HyperLogLog commands (PFCOUNT refreshing its
//! cached cardinality, PFDEBUG conversions), the bitmap commands (as
//! received, only when they change something) and the geo commands
//! (GEOADD as the ZADD it runs, the stores as received) and Redis Functions
//! (FUNCTION LOAD/DELETE/FLUSH/RESTORE as received, FCALL as its effects).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fake_replica::{check_rdb, parse_commands, FakeReplica};
use crate::harness::{
    cmd, info_int, ok, redis_cli_transfer, script, show, wait_until, Conn, Master, Node, SyncMode,
    Value, PATIENCE,
};

/// Unix time in milliseconds.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// A fake replica attached to `m` after `CONFIG SET repl-ping-replica-period
/// 3600` (as Redis's `attach_to_replication_stream`), with the offset its
/// stream starts at.
fn attach(m: &Node, c: &mut Conn) -> (FakeReplica, i64) {
    ok(c, &["CONFIG", "SET", "repl-ping-replica-period", "3600"]);
    let mut f = FakeReplica::connect(m.port());
    let offset = f.attach(4242);
    (f, offset)
}

/// The stream from `from` until the master's offset, as commands (PINGs
/// kept: see [`without_pings`]).
fn stream(f: &mut FakeReplica, c: &mut Conn, from: i64) -> Vec<Vec<String>> {
    let mut bytes = Vec::new();
    wait_until(PATIENCE, "the stream to reach the master's offset", || {
        let acked = from + bytes.len() as i64;
        f.send(&["REPLCONF", "ACK", &acked.to_string()]);
        bytes.extend(f.take_available(Duration::from_millis(50)));
        let offset = info_int(c, "replication", "master_repl_offset");
        let got = from + bytes.len() as i64;
        if got == offset {
            Ok(())
        } else {
            Err(format!(
                "offset {offset}, received up to {got}: {}",
                show(&bytes)
            ))
        }
    });
    parse_commands(&bytes)
}

/// `units` with what legitimately differs between two masters made equal:
/// millisecond times (`PXAT`, `PEXPIREAT`) become `<ms>` once checked to be
/// within a day of now, and each run of consecutive `DEL`s is sorted (SCAN
/// and RANDOMKEY visit keys in their hash table's order).
fn normalise(units: Vec<Vec<String>>) -> Vec<Vec<String>> {
    let now = now_ms();
    let mut out: Vec<Vec<String>> = units
        .into_iter()
        .map(|unit| {
            unit.into_iter()
                .map(|word| match word.parse::<i64>() {
                    Ok(ms) if ms > 1_000_000_000_000 => {
                        assert!(
                            (ms - now).abs() < 86_400_000,
                            "a time far from now in the stream: {ms}"
                        );
                        "<ms>".to_string()
                    }
                    _ => word,
                })
                .collect()
        })
        .collect();
    let is_del = |u: &Vec<String>| u.len() == 2 && u[0].eq_ignore_ascii_case("del");
    let mut i = 0;
    while i < out.len() {
        let start = i;
        while i < out.len() && is_del(&out[i]) {
            i += 1;
        }
        out[start..i].sort();
        if i == start {
            i += 1;
        }
    }
    out
}

/// Starts a master (disk sync; DEBUG enabled, for `DEBUG
/// SET-ACTIVE-EXPIRE` and `DEBUG SLEEP`).
fn start(master: Master) -> Node {
    let mut args = SyncMode::Disk.args();
    args.extend(["--enable-debug-command", "yes"]);
    master.start(&args)
}

/// Runs `setup` (not streamed), attaches a fake replica, runs `body`, and
/// returns the stream the replica received, normalised.
fn streamed(
    master: Master,
    setup: impl FnOnce(Master, &mut Conn),
    body: impl FnOnce(&Node, &mut Conn),
) -> Vec<Vec<String>> {
    let m = start(master);
    let mut c = m.conn();
    setup(master, &mut c);
    let (mut f, from) = attach(&m, &mut c);
    // A few cron ticks (hz 10) before the writes: a PING the master should
    // not send would be in the stream by then.
    std::thread::sleep(Duration::from_millis(300));
    body(&m, &mut c);
    let units = stream(&mut f, &mut c, from);
    normalise(units)
}

/// `units` less PINGs. redis-server pings at a phase of its own cron
/// (every `repl-ping-replica-period` cron seconds since its start), so
/// one can rarely come even with the period at an hour; hozon's first
/// comes a period after the replica attached, so its stream is compared
/// with its PINGs: it must have none.
fn without_pings(units: Vec<Vec<String>>) -> Vec<Vec<String>> {
    units
        .into_iter()
        .filter(|u| !(u.len() == 1 && u[0].eq_ignore_ascii_case("ping")))
        .collect()
}

/// The same scenario on both masters: the streams must be equal.
#[track_caller]
fn assert_same_stream(
    setup: impl Fn(Master, &mut Conn),
    body: impl Fn(&Node, &mut Conn),
) -> Vec<Vec<String>> {
    let redis = without_pings(streamed(Master::Redis, &setup, &body));
    let hozon = streamed(Master::Hozon, &setup, &body);
    let show_units = |units: &[Vec<String>]| {
        units
            .iter()
            .map(|u| u.join(" "))
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    assert!(
        redis == hozon,
        "the streams differ\nredis-server:\n  {}\nhozon-server:\n  {}",
        show_units(&redis),
        show_units(&hozon)
    );
    redis
}

/// Waits until `n` clients are blocked on `c`'s server.
fn wait_blocked(c: &mut Conn, n: i64) {
    wait_until(PATIENCE, "the client to block", || {
        match info_int(c, "clients", "blocked_clients") {
            b if b == n => Ok(()),
            b => Err(format!("blocked_clients:{b}")),
        }
    });
}

/// `blocker` blocks on a new connection, `feeder` (on `c`) serves it; the
/// blocked client's reply must come.
fn served_after_blocking(m: &Node, c: &mut Conn, blocker: &[&str], feeder: &str) {
    let mut blocked = m.conn();
    let args: Vec<&[u8]> = blocker.iter().map(|w| w.as_bytes()).collect();
    blocked.send_raw(&testkit::harness::encode_command(&args));
    wait_blocked(c, 1);
    script(c, feeder);
    let reply = blocked.read_reply();
    assert!(
        !reply.starts_with(b"*-1") && !reply.starts_with(b"$-1") && !reply.starts_with(b"-"),
        "{blocker:?} was not served: {}",
        show(&reply)
    );
    wait_blocked(c, 0);
}

fn no_setup(_: Master, _: &mut Conn) {}

/// Redis's "ZMPOP propagate as pop with count command to replica" and
/// "BZMPOP …", plus BZPOPMIN/BZPOPMAX served at once and after blocking.
#[test]
fn zset_pops_propagate_as_counted_pops() {
    let units = assert_same_stream(no_setup, |m, c| {
        script(
            c,
            "ZADD myzset{t} 1 one 2 two 3 three
            ZMPOP 1 myzset{t} MIN
            ZMPOP 1 myzset{t} MAX COUNT 1
            ZMPOP 2 myzset{t} myzset2{t} MIN COUNT 10
            ZMPOP 2 myzset{t} myzset2{t} MAX COUNT 10
            ZADD myzset2{t} 1 one 2 two 3 three
            ZMPOP 2 myzset{t} myzset2{t} MIN COUNT 2
            BZMPOP 0 2 myzset{t} myzset2{t} MAX COUNT 5
            ZADD z 1 a 2 b 3 c 4 d 5 e
            BZPOPMIN z 0
            BZPOPMAX z 0
            BZMPOP 0 1 z MIN
            ZPOPMIN z 1
            ZPOPMAX z
            ZPOPMAX z 5",
        );
        served_after_blocking(
            m,
            c,
            &["BZMPOP", "0", "2", "zq", "zq2", "MAX", "COUNT", "3"],
            "ZADD zq2 1 a 2 b",
        );
        served_after_blocking(m, c, &["BZPOPMIN", "zq3", "0"], "ZADD zq3 1 a 2 b");
        served_after_blocking(m, c, &["BZPOPMAX", "zq4", "0"], "ZADD zq4 1 a 2 b");
    });
    // The check itself: ZMPOP is never in the stream (Redis's Tcl test).
    assert!(units.iter().all(|u| !u[0].to_lowercase().contains("mpop")));
}

/// Redis's "LMPOP propagate as pop with count command to replica" and
/// "BLMPOP …", plus BLPOP/BRPOP/BLMOVE/BRPOPLPUSH served at once and
/// after blocking.
#[test]
fn list_pops_propagate_as_counted_pops() {
    let units = assert_same_stream(no_setup, |m, c| {
        script(
            c,
            "RPUSH l a b c d e f g
            LMPOP 1 l LEFT
            LMPOP 2 missing l RIGHT COUNT 2
            LMPOP 1 missing LEFT
            BLMPOP 0 1 l LEFT COUNT 10
            RPUSH l2 a b c d e
            BLPOP l2 0
            BRPOP l2 0
            BLMOVE l2 dst LEFT RIGHT 0
            BRPOPLPUSH l2 dst 0
            BLMPOP 0 1 l2 RIGHT
            LPOP l2",
        );
        served_after_blocking(m, c, &["BLPOP", "q1", "0"], "RPUSH q1 x y");
        served_after_blocking(m, c, &["BRPOP", "q2", "0"], "RPUSH q2 x y");
        served_after_blocking(
            m,
            c,
            &["BLMPOP", "0", "2", "q3", "q4", "RIGHT", "COUNT", "5"],
            "RPUSH q4 x y z",
        );
        served_after_blocking(
            m,
            c,
            &["BLMOVE", "q5", "d5", "RIGHT", "LEFT", "0"],
            "RPUSH q5 x y",
        );
        served_after_blocking(m, c, &["BRPOPLPUSH", "q6", "d6", "0"], "RPUSH q6 x y");
    });
    assert!(units.iter().all(|u| !u[0].to_lowercase().contains("mpop")));
}

/// Redis's "GETEX propagate as to replica as PERSIST, DEL, or nothing",
/// and every expiry form of GETEX as PEXPIREAT.
#[test]
fn getex_propagates_as_pexpireat_persist_or_del() {
    let units = assert_same_stream(no_setup, |_, c| {
        let s = now_ms() / 1000;
        let ms = now_ms();
        script(
            c,
            &format!(
                "SET foo bar EX 100
                GETEX foo PERSIST
                GETEX foo
                GETEX foo EX 100
                GETEX foo PX 100000
                GETEX foo EXAT {}
                GETEX foo PXAT {}
                GETEX foo PERSIST
                GETEX foo PERSIST
                GETEX missing EX 10
                GETEX foo EXAT {}",
                s + 1000,
                ms + 2_000_000,
                s - 100
            ),
        );
    });
    assert!(units.iter().all(|u| !u[0].eq_ignore_ascii_case("getex")));
}

/// Database 9: keys that expire 1 ms after they are written, among many
/// that do not (so hozon's active expiry, which cannot be switched off,
/// is unlikely to find them first); 10 and 11: only keys that expire.
fn lazy_setup(master: Master, c: &mut Conn) {
    if master == Master::Redis {
        ok(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    }
    ok(c, &["CONFIG", "SET", "hz", "1"]);
    ok(c, &["SELECT", "9"]);
    let mut mset = vec!["MSET".to_string()];
    for i in 0..1000 {
        mset.push(format!("decoy:{i}"));
        mset.push("v".into());
    }
    let words: Vec<&str> = mset.iter().map(String::as_str).collect();
    ok(c, &words);
    for i in 0..1000 {
        ok(c, &["EXPIRE", &format!("decoy:{i}"), "100000"]);
    }
    ok(c, &["SELECT", "0"]);
}

/// Writes the keys that expire, waits until they have, then reads them.
fn lazy_body(_: &Node, c: &mut Conn) {
    script(
        c,
        "SELECT 9
        SET g1 v PX 1
        SET m1 v PX 1
        SET m2 v PX 1
        SET s1 v PX 1
        SET i1 5 PX 1
        SET e1 v PX 1
        SET x1 v PX 1
        SET x2 v PX 1
        SELECT 10
        SET foo1 bar PX 1
        SET foo2 bar PX 1
        SELECT 11
        SET bar1 v PX 1
        SET bar2 v PX 1",
    );
    std::thread::sleep(Duration::from_millis(5));
    script(
        c,
        "SELECT 9
        GET g1
        MGET m1 m2
        SET s1 new
        INCR i1
        EXISTS e1
        MULTI
        GET x1
        GET x2
        EXEC
        SELECT 10
        SCAN 0 COUNT 1000
        SELECT 11
        RANDOMKEY",
    );
    assert_eq!(cmd(c, &["DBSIZE"]), Value::Int(0));
}

/// Lazy expiry's DELs: one alone is bare; a command that propagates more
/// than one effect is wrapped in MULTI/EXEC, but for SCAN and RANDOMKEY
/// (Redis's "SCAN: Lazy-expire should not be wrapped in MULTI/EXEC" and
/// "RANDOMKEY: …").
#[test]
fn lazy_expiry_dels_are_wrapped_as_redis_wraps_them() {
    let units = assert_same_stream(lazy_setup, lazy_body);
    // The scenario did what it says on redis-server: the reads deleted.
    let tail: Vec<String> = units[units.len().saturating_sub(6)..]
        .iter()
        .map(|u| u.join(" ").to_lowercase())
        .collect();
    assert_eq!(
        tail,
        [
            "select 10",
            "del foo1",
            "del foo2",
            "select 11",
            "del bar1",
            "del bar2"
        ],
        "the SCAN and RANDOMKEY DELs, bare"
    );
}

/// A client blocked on a key that is written but has expired by the time
/// the blocked clients are served (Redis's "SWAPDB wants to wake blocked
/// client, but the key already expired" and "MULTI + LPUSH + EXPIRE +
/// DEBUG SLEEP on blocked client, key already expired"): serving deletes
/// the key and propagates its DEL after the unit that made it ready, and
/// the client stays blocked until CLIENT UNBLOCK.
#[test]
fn a_ready_key_that_expired_is_deleted_and_its_waiter_keeps_waiting() {
    let setup = |_: Master, c: &mut Conn| {
        ok(c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    };
    let body = |m: &Node, c: &mut Conn| {
        for scenario in ["swapdb", "multi"] {
            let mut blocked = m.conn();
            ok(&mut blocked, &["SELECT", "9"]);
            let id = match cmd(&mut blocked, &["CLIENT", "ID"]) {
                Value::Int(id) => id.to_string(),
                other => panic!("CLIENT ID: {other:?}"),
            };
            if scenario == "swapdb" {
                script(c, "SELECT 1\nRPUSH k hello\nPEXPIRE k 100");
                blocked.send_raw(&testkit::harness::encode_command(&[b"BRPOP", b"k", b"0"]));
                wait_blocked(c, 1);
                std::thread::sleep(Duration::from_millis(110));
                ok(c, &["SWAPDB", "1", "9"]);
            } else {
                blocked.send_raw(&testkit::harness::encode_command(&[b"BRPOP", b"k", b"0"]));
                wait_blocked(c, 1);
                script(
                    c,
                    "SELECT 9\nMULTI\nRPUSH k hello\nPEXPIRE k 100\nDEBUG SLEEP 0.2\nEXEC",
                );
            }
            match cmd(c, &["CLIENT", "LIST", "ID", &id]) {
                Value::Bulk(line) => {
                    let line = String::from_utf8_lossy(&line).to_string();
                    assert!(line.contains("flags=b"), "{scenario}: not blocked: {line}");
                }
                other => panic!("CLIENT LIST: {other:?}"),
            }
            assert_eq!(cmd(c, &["CLIENT", "UNBLOCK", &id]), Value::Int(1));
            let reply = blocked.read_reply();
            assert!(reply.starts_with(b"*-1"), "{scenario}: {}", show(&reply));
            assert_eq!(cmd(c, &["EXISTS", "k"]), Value::Int(0), "{scenario}");
            ok(c, &["FLUSHALL"]);
        }
    };
    let units = assert_same_stream(setup, body);
    let text: Vec<String> = units.iter().map(|u| u.join(" ").to_lowercase()).collect();
    assert!(
        text.windows(2)
            .any(|w| w[0] == "swapdb 1 9" && w[1] == "select 9")
            && text.iter().filter(|u| *u == "del k").count() == 2,
        "the DELs of the expired ready keys: {text:?}"
    );
}

/// Each command's raw reply on a new connection to `port`.
fn raw_replies(port: u16, commands: &[&[&str]]) -> Vec<String> {
    let mut f = FakeReplica::connect(port);
    commands
        .iter()
        .map(|words| {
            f.send(words);
            f.line()
        })
        .collect()
}

/// `REPLCONF rdb-filter-only` accepts what Redis accepts, refuses the rest
/// with Redis's errors, and a filtered SYNC needs `capa eof`.
#[test]
fn rdb_filter_only_replies_as_redis() {
    let script: &[&[&str]] = &[
        &["REPLCONF", "rdb-filter-only", ""],
        &["REPLCONF", "rdb-filter-only", "functions"],
        &["REPLCONF", "rdb-filter-only", "FUNCTIONS functions"],
        &["REPLCONF", "rdb-filter-only", "keys"],
        &["REPLCONF", "rdb-filter-only", "\"functions"],
        &["REPLCONF", "rdb-filter-only", "functions", "rdb-only", "1"],
        &["SYNC"],
    ];
    let redis = Master::Redis.start(&SyncMode::Disk.args());
    let hozon = Master::Hozon.start(&SyncMode::Disk.args());
    let want = raw_replies(redis.port(), script);
    assert_eq!(
        want.last().map(String::as_str),
        Some("-ERR Filtered replica requires EOF capability"),
        "redis-server's replies: {want:?}"
    );
    assert_eq!(raw_replies(hozon.port(), script), want);
}

/// What `redis-cli --replica` does: `capa eof`, `rdb-filter-only ""`, SYNC:
/// a payload without keys in the `$EOF:` form (even with
/// `repl-diskless-sync no`), then the stream.
fn filtered_sync(master: Master) -> Vec<Vec<String>> {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    script(&mut c, "SET a 1\nSELECT 3\nSET b 2\nSELECT 0");
    ok(
        &mut c,
        &["CONFIG", "SET", "repl-ping-replica-period", "3600"],
    );
    let mut f = FakeReplica::connect(m.port());
    f.send(&["REPLCONF", "capa", "eof"]);
    f.send(&["REPLCONF", "rdb-filter-only", ""]);
    assert_eq!(f.line(), "+OK");
    assert_eq!(f.line(), "+OK");
    f.send(&["SYNC"]);
    let (payload, eof_form) = f.payload();
    assert!(eof_form, "a filtered payload in the $EOF: form");
    // A cron tick or more: no PING may come (see `streamed`).
    std::thread::sleep(Duration::from_millis(300));
    let checked = check_rdb(&payload);
    assert!(checked.contains("[info] 0 keys read"), "{checked}");
    let from = crate::fake_replica::aux(&checked, "repl-offset")
        .parse()
        .expect("repl-offset");
    script(&mut c, "SET after 1\nSELECT 3\nDEL b");
    normalise(stream(&mut f, &mut c, from))
}

#[test]
fn rdb_filter_only_sync_has_no_keys_then_the_stream() {
    let redis = without_pings(filtered_sync(Master::Redis));
    assert_eq!(filtered_sync(Master::Hozon), redis);
}

/// `redis-cli --functions-rdb` gets a file without keys (hozon has no
/// functions) and leaves the master without a replica.
fn functions_rdb(master: Master) {
    let m = master.start(&SyncMode::Disk.args());
    let mut c = m.conn();
    script(&mut c, "SET a 1\nLPUSH l x");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("functions.rdb");
    redis_cli_transfer(m.port(), "--functions-rdb", &file);
    let checked = check_rdb(&std::fs::read(&file).expect("the rdb file"));
    assert!(checked.contains("[info] 0 keys read"), "{checked}");
    wait_until(
        PATIENCE,
        "the rdb-only client to be gone",
        || match info_int(&mut c, "replication", "connected_slaves") {
            0 => Ok(()),
            n => Err(format!("connected_slaves:{n}")),
        },
    );
    assert_eq!(cmd(&mut c, &["DBSIZE"]), Value::Int(2));
}

#[test]
fn redis_cli_functions_rdb_redis_master() {
    functions_rdb(Master::Redis);
}

#[test]
fn redis_cli_functions_rdb_hozon_master() {
    functions_rdb(Master::Hozon);
}

/// Other commands Redis rewrites or wraps: expiry times in the past (not
/// `SET … EXAT <past>`: Redis stores that key and active expiry deletes it
/// whenever it finds it), the float increments, SPOP, transactions and scripts with one write or
/// several.
#[test]
fn rewritten_commands_propagate_as_redis_propagates_them() {
    assert_same_stream(no_setup, |_, c| {
        let past = now_ms() / 1000 - 100;
        script(
            c,
            &format!(
                "SET a 1
                EXPIRE a -1
                SET b 1
                EXPIREAT b {past}
                SET c 1
                PEXPIRE c 0
                SETEX e 100 v
                PSETEX f 100000 v
                SET g v KEEPTTL
                GETSET g w
                GETDEL g
                INCRBYFLOAT n 1.5
                HINCRBYFLOAT h f 2.5
                SADD s one
                SPOP s
                SADD s2 a
                SPOP s2 5
                RPUSH l a b
                RPOPLPUSH l l2
                LMOVE l l2 LEFT RIGHT
                MULTI
                SET m1 1
                EXEC
                MULTI
                SET m2 1
                INCR m2
                GET m2
                EXEC
                MULTI
                GET m2
                EXEC
                EVAL \"return redis.call('set', KEYS[1], 'x')\" 1 e1
                EVAL \"redis.call('set', KEYS[1], 'x'); return redis.call('incr', KEYS[2])\" 2 e2 e3
                EVAL \"return redis.call('get', KEYS[1])\" 1 e1
                SET p 1 PX 100000
                PERSIST p
                PERSIST p
                SETNX q 1
                SETNX q 2
                MSETNX r1 1 r2 2
                DEL missing
                UNLINK q"
            ),
        );
    });
}

/// Stream commands: XREADGROUP as XCLAIM (and XGROUP SETID with NOACK),
/// XCLAIM and XAUTOCLAIM, served at once and after blocking (explicit IDs,
/// so both masters hold the same entries).
///
/// hozon logs more than Redis 7.0 here on purpose (src/command/
/// stream_group.rs): `XGROUP SETID … ENTRIESREAD` after every XREADGROUP
/// that moved the group's last ID (Redis 7.0 only with NOACK, so its
/// replicas' and AOF's read counters drift: Redis 7.2 does the same as
/// hozon) and `XGROUP CREATECONSUMER` for a consumer XREADGROUP created,
/// with the MULTI/EXEC that more than one effect brings. So Redis's stream
/// must be hozon's less exactly such units.
#[test]
fn stream_commands_propagate_as_redis_propagates_them() {
    let body = |m: &Node, c: &mut Conn| {
        script(
            c,
            "XADD st 1-1 f v
            XADD st 2-1 f v
            XADD st 3-1 f v
            XGROUP CREATE st g 0
            XGROUP CREATE st g2 $ MKSTREAM
            XREADGROUP GROUP g alice COUNT 2 STREAMS st >
            XREADGROUP GROUP g alice NOACK COUNT 1 STREAMS st >
            XREADGROUP GROUP g bob STREAMS st 0
            XCLAIM st g bob 0 1-1
            XCLAIM st g carol 0 2-1 JUSTID
            XAUTOCLAIM st g dave 0 0-0 COUNT 1
            XAUTOCLAIM st g erin 0 0-0 JUSTID
            XACK st g 1-1
            XGROUP SETID st g 0
            XGROUP CREATECONSUMER st g frank
            XGROUP DELCONSUMER st g frank
            XDEL st 3-1
            XTRIM st MAXLEN 1
            XSETID st 5-1
            XGROUP DESTROY st g2
            XGROUP SETID st g $",
        );
        served_after_blocking(
            m,
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "zed",
                "BLOCK",
                "0",
                "STREAMS",
                "st",
                ">",
            ],
            "XADD st 6-1 f v",
        );
    };
    let redis = without_pings(streamed(Master::Redis, no_setup, body));
    let hozon = streamed(Master::Hozon, no_setup, body);
    let deliberate = |u: &Vec<String>| {
        let words: Vec<String> = u.iter().map(|w| w.to_lowercase()).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        matches!(
            words.as_slice(),
            ["multi"] | ["exec"] | ["xgroup", "createconsumer", ..]
        ) || (words.len() == 7 && words[..2] == ["xgroup", "setid"] && words[5] == "entriesread")
    };
    let mut want = redis.iter().peekable();
    let mut extra = Vec::new();
    for unit in &hozon {
        if want.peek() == Some(&unit) {
            want.next();
        } else {
            extra.push(unit.join(" "));
        }
    }
    let missing: Vec<String> = want.map(|u| u.join(" ")).collect();
    assert!(
        missing.is_empty() && hozon.iter().filter(|u| !redis.contains(u)).all(deliberate),
        "hozon's stream is not redis-server's plus the deliberate units\n\
         missing: {missing:?}\nextra: {extra:?}\nredis-server: {redis:?}\nhozon: {hozon:?}"
    );
    assert!(
        extra.iter().any(|u| u.contains("ENTRIESREAD 2")),
        "the deliberate SETID after XREADGROUP: {extra:?}"
    );
}

/// HyperLogLog: a PFCOUNT that refreshes the cached cardinality writes
/// the string and is propagated as received (Redis counts it as a change);
/// one that reads the cache, a union count and a PFADD that changes no
/// register are not; PFDEBUG TODENSE and GETREG are when they convert.
#[test]
fn hyperloglog_commands_propagate_as_redis_propagates_them() {
    let units = assert_same_stream(no_setup, |_, c| {
        script(
            c,
            "PFADD h a b c
            PFADD h a
            PFCOUNT h
            PFCOUNT h
            PFCOUNT h missing
            PFMERGE m h
            PFMERGE m
            PFDEBUG ENCODING m
            PFDEBUG TODENSE m
            PFDEBUG TODENSE m
            PFDEBUG GETREG h
            PFDEBUG GETREG h
            PFCOUNT m
            PFADD m d",
        );
    });
    let names: Vec<String> = units.iter().map(|u| u[0].to_ascii_lowercase()).collect();
    assert_eq!(
        names.iter().filter(|n| *n == "pfcount").count(),
        2,
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|n| *n == "pfdebug").count(),
        2,
        "{names:?}"
    );
}

/// The bitmap commands propagate as received when they change something,
/// and not at all otherwise (a SETBIT that changes no bit, a BITFIELD of
/// GETs or whose writes OVERFLOW FAIL refused, a BITOP with nothing to
/// store or delete, the reads).
#[test]
fn bitmap_commands_propagate_only_when_they_change_something() {
    let units = assert_same_stream(no_setup, |_, c| {
        script(
            c,
            "SETBIT k 7 1
            SETBIT k 7 1
            SETBIT k 7 0
            SETBIT k 40 0
            GETBIT k 7
            BITCOUNT k 0 -1 BIT
            BITPOS k 0
            BITFIELD k GET u8 0
            BITFIELD k SET u8 0 0
            BITFIELD k SET u8 0 200 INCRBY i5 #3 -7
            BITFIELD k OVERFLOW FAIL INCRBY u8 0 100
            BITFIELD_RO k GET u8 0
            BITOP AND d missing
            BITOP NOT d k
            BITOP AND d missing
            SET end 1",
        );
    });
    let names: Vec<&str> = units.iter().map(|u| u[0].as_str()).collect();
    assert!(
        names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case("setbit"))
            .count()
            == 3
    );
    assert!(names.iter().any(|n| n.eq_ignore_ascii_case("set")));
}

/// Geo: GEOADD runs ZADD and propagates as that `zadd key [options]
/// score member …` (lower-case, as Redis rewrites the command vector),
/// only when it changed something; GEOSEARCHSTORE and GEORADIUS* STORE
/// propagate as received when they store or delete the destination, and
/// not at all otherwise; the searches and reads never. (The points are
/// near -180,-85, where scores are below 10^12: larger numbers in the
/// stream are taken for times by `normalise`.)
#[test]
fn geo_commands_propagate_as_redis_propagates_them() {
    let units = assert_same_stream(no_setup, |_, c| {
        script(
            c,
            "GEOADD geo -179.5 -84.5 a -179 -84 b
            GEOADD geo -179.5 -84.5 a
            GEOADD geo CH XX -179.4 -84.5 a -179 -83 c
            GEOADD geo NX CH -179.3 -84.5 a
            GEOSEARCH geo FROMMEMBER a BYRADIUS 200 km
            GEORADIUS_RO geo -179 -84 200 km
            GEOPOS geo a
            GEODIST geo a b
            GEOHASH geo a
            GEOSEARCHSTORE dst geo FROMMEMBER a BYRADIUS 200 km STOREDIST
            GEORADIUS geo -179 -84 200 km STORE dst2
            GEORADIUSBYMEMBER geo a 200 km STOREDIST dst3 COUNT 1
            GEOSEARCHSTORE dst geo FROMLONLAT 0 0 BYRADIUS 1 km
            GEOSEARCHSTORE dst geo FROMLONLAT 0 0 BYRADIUS 1 km
            GEORADIUS missing 0 0 1 km STORE dst2
            GEORADIUS missing 0 0 1 km STORE dst2
            SET end 1",
        );
    });
    let names: Vec<&str> = units.iter().map(|u| u[0].as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "zadd").count(),
        2,
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.eq_ignore_ascii_case("georadius")));
}

/// Redis Functions: FUNCTION LOAD (REPLACE too), DELETE, FLUSH and RESTORE
/// are propagated as received when they succeed (a failed one not at
/// all); an FCALL propagates the effects of the writes its function made
/// (wrapped in MULTI/EXEC), an FCALL or FCALL_RO that writes nothing
/// propagates nothing. The RESTORE payload is the master's own FUNCTION
/// DUMP, so the streams are equal only when the dumps are.
#[test]
fn function_commands_propagate_as_redis_propagates_them() {
    let code = "#!lua name=lib\n\
        redis.register_function('w', function(keys, args) \
        redis.call('set', keys[1], args[1]) return redis.call('incr', keys[2]) end)\n\
        redis.register_function('one', function(keys, args) \
        return redis.call('set', keys[1], args[1]) end)\n\
        redis.register_function{function_name='r', callback=function(keys) \
        return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    let units = assert_same_stream(no_setup, |_, c| {
        ok(c, &["FUNCTION", "LOAD", code]);
        ok(c, &["FCALL", "w", "2", "a", "n", "v"]);
        ok(c, &["FCALL", "one", "1", "b", "x"]);
        ok(c, &["FCALL", "r", "1", "a"]);
        ok(c, &["FCALL_RO", "r", "1", "a"]);
        ok(c, &["FUNCTION", "LOAD", "REPLACE", code]);
        // Failures propagate nothing.
        for failing in [
            &["FUNCTION", "LOAD", code][..],
            &["FUNCTION", "LOAD", "#!lua name=bad\nreturn 1"],
            &["FUNCTION", "DELETE", "nosuch"],
            &["FUNCTION", "RESTORE", "bad_payload"],
            &["FCALL", "nosuch", "0"],
            &["FCALL_RO", "one", "1", "b", "y"],
        ] {
            assert!(
                matches!(cmd(c, failing), Value::Error(_)),
                "{failing:?} should fail"
            );
        }
        let Value::Bulk(dump) = ok(c, &["FUNCTION", "DUMP"]) else {
            panic!("FUNCTION DUMP is not a bulk string");
        };
        ok(c, &["FUNCTION", "DELETE", "lib"]);
        let restore: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &dump];
        assert_eq!(c.call(&restore), b"+OK\r\n");
        ok(c, &["FUNCTION", "FLUSH"]);
        ok(c, &["FUNCTION", "FLUSH", "ASYNC"]);
        let restore: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &dump, b"FLUSH"];
        assert_eq!(c.call(&restore), b"+OK\r\n");
        let restore: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &dump, b"REPLACE"];
        assert_eq!(c.call(&restore), b"+OK\r\n");
        ok(c, &["FUNCTION", "FLUSH", "SYNC"]);
        ok(c, &["SET", "end", "1"]);
    });
    let names: Vec<String> = units
        .iter()
        .map(|u| u.iter().take(2).cloned().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case("function load"))
            .count()
            == 2,
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .filter(|n| n.eq_ignore_ascii_case("function restore"))
            .count()
            == 3,
        "{names:?}"
    );
}

/// MIGRATE propagates as `DEL` of the keys the target accepted (none
/// with COPY, nor for keys the target refused), as Redis rewrites it.
/// Each master migrates to a redis-server target of its own.
#[test]
fn migrate_propagates_as_del_of_the_moved_keys() {
    let units = assert_same_stream(no_setup, |_, c| {
        let target = testkit::harness::start_redis(&[]);
        let mut t = testkit::harness::Conn::connect(target.port);
        t.call(&[b"SET", b"busy", b"there"]);
        let port = target.port.to_string();
        script(
            c,
            &format!(
                "SET a 1
                SET b 2
                SET c 3 PX 100000
                SET busy here
                SET kept 4
                SET moved 5
                MIGRATE 127.0.0.1 {port} a 0 5000
                MIGRATE 127.0.0.1 {port} \"\" 0 5000 KEYS b missing c
                MIGRATE 127.0.0.1 {port} kept 0 5000 COPY
                MIGRATE 127.0.0.1 {port} nothing 0 5000"
            ),
        );
        let refused = c.call(&[
            b"MIGRATE",
            b"127.0.0.1",
            port.as_bytes(),
            b"",
            b"0",
            b"5000",
            b"KEYS",
            b"moved",
            b"busy",
        ]);
        assert!(refused.starts_with(b"-ERR Target instance replied with error: BUSYKEY"));
        script(c, "SET end 1");
    });
    let dels: Vec<String> = units
        .iter()
        .filter(|u| u[0].eq_ignore_ascii_case("del"))
        .map(|u| u.join(" "))
        .collect();
    assert_eq!(dels, ["DEL a", "DEL b c", "DEL moved"], "{units:?}");
}
