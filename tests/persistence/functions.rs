//! Function libraries are persistent data: they survive AOF replay, every
//! rewrite preamble, dump.hoz and RDB snapshots, and move between hozon
//! and redis-server through RDB files, FUNCTION DUMP/RESTORE and
//! replication, in both directions. What is compared after each step is
//! FUNCTION LIST WITHCODE (libraries with their functions and code) and
//! what FCALL answers.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{bulk_payload, show, start_hozon, start_redis, Conn};

const LIB_A: &str = "#!lua name=liba\n\
    local function incr(key, by) return redis.call('INCRBY', key, by) end\n\
    redis.register_function('hits', function(keys, args) return incr(keys[1], args[1]) end)\n\
    redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='read a counter'}";
// No `no-writes` flag would make these write functions, which a
// read-only replica refuses to run.
const LIB_B_V1: &str = "#!lua name=libb\nredis.register_function{function_name='version', callback=function() return 1 end, flags={'no-writes'}}";
const LIB_B_V2: &str = "#!lua name=libb\nredis.register_function{function_name='version', callback=function() return 2 end, flags={'no-writes'}}";
const LIB_C: &str = "#!lua name=libc\nredis.register_function{function_name='gone', callback=function() return 'gone' end, flags={'no-writes'}}";

fn call(conn: &mut Conn, args: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    conn.call(&args)
}

#[track_caller]
fn ok(conn: &mut Conn, args: &[&str]) -> Vec<u8> {
    let reply = call(conn, args);
    assert!(
        !reply.starts_with(b"-"),
        "{args:?} answered {}",
        show(&reply)
    );
    reply
}

/// Loads the libraries and changes them the ways the AOF must replay:
/// LOAD, LOAD REPLACE, DELETE, and an FCALL that writes.
fn build_libraries(conn: &mut Conn) {
    ok(conn, &["FUNCTION", "LOAD", LIB_A]);
    ok(conn, &["FUNCTION", "LOAD", LIB_B_V1]);
    ok(conn, &["FUNCTION", "LOAD", "REPLACE", LIB_B_V2]);
    ok(conn, &["FUNCTION", "LOAD", LIB_C]);
    ok(conn, &["FUNCTION", "DELETE", "libc"]);
    assert_eq!(
        call(conn, &["FCALL", "hits", "1", "counter", "5"]),
        b":5\r\n"
    );
}

/// What the libraries look like: FUNCTION LIST WITHCODE of each library
/// (one call per library: Redis lists several in hash order) and the
/// replies of the functions.
fn libraries(conn: &mut Conn) -> Vec<String> {
    let mut out = Vec::new();
    for lib in ["liba", "libb", "libc"] {
        out.push(functions_sorted(show(&call(
            conn,
            &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", lib],
        ))));
    }
    out.push(show(&call(conn, &["FCALL_RO", "peek", "1", "counter"])));
    out.push(show(&call(conn, &["FCALL", "version", "0"])));
    out.push(show(&call(conn, &["FCALL", "gone", "0"])));
    out
}

/// A FUNCTION LIST reply (as `show` prints it) with each library's
/// functions in name order: Redis lists them in its hash table's order.
fn functions_sorted(list: String) -> String {
    const ENTRY: &str = "*6\\r\\n$4\\r\\nname";
    let Some(start) = list.find(ENTRY) else {
        return list;
    };
    let (head, rest) = list.split_at(start);
    let end = rest.find("$12\\r\\nlibrary_code").unwrap_or(rest.len());
    let (entries, tail) = rest.split_at(end);
    let mut parts: Vec<&str> = entries.split(ENTRY).filter(|p| !p.is_empty()).collect();
    parts.sort_unstable();
    let sorted: String = parts.iter().map(|p| format!("{ENTRY}{p}")).collect();
    format!("{head}{sorted}{tail}")
}

fn expected_libraries(conn: &mut Conn) -> Vec<String> {
    let seen = libraries(conn);
    assert!(seen[0].contains("liba") && seen[0].contains("read a counter"));
    assert!(seen[1].contains("return 2"), "{}", seen[1]);
    assert_eq!(seen[2], "*0\\r\\n");
    assert_eq!(seen[3], "$1\\r\\n5\\r\\n");
    assert_eq!(seen[4], ":2\\r\\n");
    assert_eq!(seen[5], "-ERR Function not found\\r\\n");
    seen
}

pub(crate) fn info_field(conn: &mut Conn, name: &str) -> String {
    let info = String::from_utf8_lossy(&call(conn, &["INFO", "persistence"])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .trim()
        .to_string()
}

pub(crate) fn wait_rewrite_done(conn: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(conn, "aof_rewrite_in_progress") != "0"
        || info_field(conn, "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "the rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(conn, "aof_last_bgrewrite_status"), "ok");
}

fn dir_arg(dir: &Path) -> String {
    dir.to_string_lossy().into_owned()
}

#[test]
fn libraries_survive_replay_every_rewrite_preamble_and_every_snapshot_format() {
    for preamble in ["native", "none", "rdb"] {
        for snapshot in ["native", "rdb"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir_arg(dir.path());
            let args = [
                "--dir",
                &d,
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--aof-preamble",
                preamble,
                "--snapshot-format",
                snapshot,
            ];
            let context = format!("aof-preamble {preamble}, snapshot-format {snapshot}");
            let server = start_hozon(&args);
            let mut conn = Conn::connect(server.port);
            build_libraries(&mut conn);
            let expected = expected_libraries(&mut conn);
            drop(server); // SIGKILL: the AOF is replayed

            let server = start_hozon(&args);
            let mut conn = Conn::connect(server.port);
            assert_eq!(libraries(&mut conn), expected, "{context}: after replay");
            ok(&mut conn, &["BGREWRITEAOF"]);
            wait_rewrite_done(&mut conn);
            ok(&mut conn, &["SAVE"]);
            drop(server);

            let server = start_hozon(&args);
            let mut conn = Conn::connect(server.port);
            assert_eq!(
                libraries(&mut conn),
                expected,
                "{context}: after the rewrite"
            );
            drop(server);

            // The snapshot alone (the AOF off: the snapshot is loaded).
            let server = start_hozon(&["--dir", &d, "--appendonly", "no"]);
            let mut conn = Conn::connect(server.port);
            assert_eq!(
                libraries(&mut conn),
                expected,
                "{context}: from the snapshot"
            );
        }
    }
}

#[test]
fn a_flush_and_a_restore_replay_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir_arg(dir.path());
    let args = [
        "--dir",
        &d,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    build_libraries(&mut conn);
    let expected = expected_libraries(&mut conn);
    let dumped = bulk_payload(&conn.call(&[b"FUNCTION", b"DUMP"]));
    ok(&mut conn, &["FUNCTION", "FLUSH"]);
    assert_eq!(
        call(&mut conn, &["FCALL", "version", "0"]),
        b"-ERR Function not found\r\n"
    );
    let restored = conn.call(&[b"FUNCTION", b"RESTORE", &dumped]);
    assert_eq!(restored, b"+OK\r\n");
    assert_eq!(libraries(&mut conn), expected);
    drop(server);
    let server = start_hozon(&args);
    let mut conn = Conn::connect(server.port);
    assert_eq!(
        libraries(&mut conn),
        expected,
        "after replaying FLUSH and RESTORE"
    );
}

#[test]
fn rdb_files_carry_libraries_between_hozon_and_redis() {
    // hozon writes an RDB; redis-server loads it.
    let hozon_dir = tempfile::tempdir().unwrap();
    let hd = dir_arg(hozon_dir.path());
    let hozon = start_hozon(&["--dir", &hd, "--snapshot-format", "rdb"]);
    let mut conn = Conn::connect(hozon.port);
    build_libraries(&mut conn);
    let expected = expected_libraries(&mut conn);
    ok(&mut conn, &["SAVE"]);
    drop(hozon);
    let redis = start_redis(&["--dir", &hd, "--dbfilename", "dump.rdb"]);
    let mut rconn = Conn::connect(redis.port);
    assert_eq!(
        libraries(&mut rconn),
        expected,
        "redis-server loading hozon's RDB"
    );

    // redis-server writes an RDB; hozon loads it.
    let redis_dir = tempfile::tempdir().unwrap();
    let rd = dir_arg(redis_dir.path());
    let redis = start_redis(&["--dir", &rd, "--dbfilename", "dump.rdb"]);
    let mut rconn = Conn::connect(redis.port);
    build_libraries(&mut rconn);
    let from_redis = expected_libraries(&mut rconn);
    assert_eq!(from_redis, expected);
    ok(&mut rconn, &["SAVE"]);
    drop(redis);
    let hozon = start_hozon(&["--dir", &rd, "--dbfilename", "dump.rdb"]);
    let mut conn = Conn::connect(hozon.port);
    assert_eq!(libraries(&mut conn), expected, "hozon loading Redis's RDB");
}

#[test]
fn function_dump_payloads_restore_in_both_directions() {
    let hozon = start_hozon(&[]);
    let redis = start_redis(&[]);
    let (mut h, mut r) = (Conn::connect(hozon.port), Conn::connect(redis.port));
    build_libraries(&mut h);
    let expected = expected_libraries(&mut h);
    let from_hozon = bulk_payload(&h.call(&[b"FUNCTION", b"DUMP"]));
    assert_eq!(r.call(&[b"FUNCTION", b"RESTORE", &from_hozon]), b"+OK\r\n");
    ok(&mut r, &["SET", "counter", "5"]);
    assert_eq!(
        libraries(&mut r),
        expected,
        "Redis restoring hozon's payload"
    );
    let from_redis = bulk_payload(&r.call(&[b"FUNCTION", b"DUMP"]));
    assert_eq!(
        h.call(&[b"FUNCTION", b"RESTORE", &from_redis, b"REPLACE"]),
        b"+OK\r\n"
    );
    assert_eq!(
        libraries(&mut h),
        expected,
        "hozon restoring Redis's payload"
    );
}

/// Waits until `conn` (a replica) has `lib`.
fn wait_for_library(conn: &mut Conn, lib: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = call(conn, &["FUNCTION", "LIST", "LIBRARYNAME", lib]);
        if reply != b"*0\r\n" && !reply.starts_with(b"-") {
            return;
        }
        assert!(Instant::now() < deadline, "the replica never got {lib}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn replication_carries_libraries_both_ways() {
    for hozon_is_master in [true, false] {
        let hozon = start_hozon(&[]);
        let redis = start_redis(&[]);
        let (master_port, replica_port) = if hozon_is_master {
            (hozon.port, redis.port)
        } else {
            (redis.port, hozon.port)
        };
        let context = if hozon_is_master {
            "hozon master, redis replica"
        } else {
            "redis master, hozon replica"
        };
        let mut master = Conn::connect(master_port);
        let mut replica = Conn::connect(replica_port);
        // In the full sync's payload...
        ok(&mut master, &["FUNCTION", "LOAD", LIB_A]);
        ok(&mut master, &["FUNCTION", "LOAD", LIB_C]);
        // ...replacing what the replica had.
        ok(&mut replica, &["FUNCTION", "LOAD", LIB_B_V1]);
        let port = master_port.to_string();
        ok(&mut replica, &["REPLICAOF", "127.0.0.1", &port]);
        wait_for_library(&mut replica, "liba");
        let libb = call(&mut replica, &["FUNCTION", "LIST", "LIBRARYNAME", "libb"]);
        assert_eq!(
            libb, b"*0\r\n",
            "{context}: the replica kept its own library"
        );
        // ...and in the stream.
        ok(&mut master, &["FUNCTION", "LOAD", LIB_B_V1]);
        ok(&mut master, &["FUNCTION", "LOAD", "REPLACE", LIB_B_V2]);
        ok(&mut master, &["FUNCTION", "DELETE", "libc"]);
        assert_eq!(
            call(&mut master, &["FCALL", "hits", "1", "counter", "5"]),
            b":5\r\n"
        );
        let expected = expected_libraries(&mut master);
        let deadline = Instant::now() + Duration::from_secs(30);
        while libraries(&mut replica) != expected {
            assert!(
                Instant::now() < deadline,
                "{context}: the replica has {:?}, the master {:?}",
                libraries(&mut replica),
                expected
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_library_that_does_not_compile_refuses_the_start() {
    // An RDB holding a library whose code fails: hozon refuses to start
    // (Redis refuses such a file too) and leaves the file as it was.
    let dir = tempfile::tempdir().unwrap();
    let d = dir_arg(dir.path());
    let hozon = start_hozon(&[
        "--dir",
        &d,
        "--snapshot-format",
        "rdb",
        "--rdbcompression",
        "no",
    ]);
    let mut conn = Conn::connect(hozon.port);
    ok(&mut conn, &["FUNCTION", "LOAD", LIB_B_V1]);
    ok(&mut conn, &["SAVE"]);
    drop(hozon);
    let path = dir.path().join("dump.rdb");
    let mut rdb = std::fs::read(&path).unwrap();
    let at = rdb
        .windows(8)
        .position(|w| w == b"function")
        .expect("the library's code in the file");
    // `function` → `fnnction`: a syntax error, same length (the file
    // has no checksum to fix: hozon writes one, so recompute it).
    rdb[at + 1] = b'n';
    let body = rdb.len() - 8;
    let crc = hozon::rdb::crc64(&rdb[..body]);
    rdb[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &rdb).unwrap();
    let output = std::process::Command::new(crate::harness::hozon_server_path())
        .args(["--port", &crate::harness::unused_port().to_string()])
        .args(["--dir", &d, "--appendonly", "no"])
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "hozon started with a broken library"
    );
    let log = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        log.contains("cannot load the function libraries"),
        "the refusal does not say why: {log}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), rdb, "the file was changed");
}
