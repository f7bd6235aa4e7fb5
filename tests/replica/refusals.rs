//! A hozon replica and a redis-server replica of the same redis-server
//! master answer the same bytes: READONLY for writes (plain, queued in
//! MULTI, from a script), REPLICAOF's errors and replies; expired keys
//! read as absent but stay until the master deletes them; REPLICAOF NO
//! ONE makes both writable masters; a replica with appendonly yes has the
//! synced dataset in its own AOF.

use std::time::Duration;

use testkit::harness::{start_hozon, start_redis, Conn};

use crate::{call, dataset, fill, hozon_replica, info_field, wait_caught_up, Value};

/// The raw replies of both replicas to the same commands must be equal.
fn same(redis: &mut Conn, hozon: &mut Conn, commands: &[&[&str]]) {
    for command in commands {
        let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        let (r, h) = (redis.call(&args), hozon.call(&args));
        assert_eq!(
            String::from_utf8_lossy(&h),
            String::from_utf8_lossy(&r),
            "{command:?}"
        );
    }
}

#[test]
fn refusals_and_promotion_match_a_redis_replica() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    call(&mut m, &["SET", "a", "1"]);
    let port = master.port.to_string();
    let redis_replica = start_redis(&["--replicaof", "127.0.0.1", &port]);
    let hozon_replica = hozon_replica(&master, &[]);
    let mut r = Conn::connect(redis_replica.port);
    let mut h = Conn::connect(hozon_replica.port);
    wait_caught_up(&mut m, &mut r);
    wait_caught_up(&mut m, &mut h);
    // The master's link counts as a client, as in Redis.
    assert_eq!(
        info_field(&mut h, "clients", "connected_clients"),
        info_field(&mut r, "clients", "connected_clients")
    );
    same(
        &mut r,
        &mut h,
        &[
            &["SET", "x", "1"],
            &["INCR", "a"],
            &["MULTI"],
            &["SET", "y", "2"],
            &["GET", "a"],
            &["EXEC"],
            &["EVAL", "return redis.call('SET', 'x', '1')", "0"],
            &["EVAL", "return redis.call('GET', 'a')", "0"],
            &["GET", "a"],
            &["REPLICAOF", "127.0.0.1", &port],
            &["REPLICAOF", "127.0.0.1", "65536"],
            &["REPLICAOF", "127.0.0.1", "-1"],
            &["REPLICAOF", "127.0.0.1", "port"],
            &["SLAVEOF", "127.0.0.1"],
            &["WAIT", "0", "0"],
            &["WAIT", "x", "0"],
        ],
    );
    // A key past its TTL reads as absent on the replica, but stays until
    // the master's DEL (the master is paused so it cannot expire it).
    call(&mut m, &["SET", "soon", "v", "PX", "300"]);
    wait_caught_up(&mut m, &mut r);
    wait_caught_up(&mut m, &mut h);
    call(&mut m, &["DEBUG", "SLEEP", "0"]);
    assert_eq!(call(&mut h, &["GET", "soon"]), Value::Bulk(b"v".to_vec()));
    // Stop the master's active expiry from deleting it meanwhile.
    call(&mut m, &["CLIENT", "PAUSE", "3000", "WRITE"]);
    std::thread::sleep(Duration::from_millis(500));
    same(
        &mut r,
        &mut h,
        &[
            &["GET", "soon"],
            &["EXISTS", "soon"],
            &["TTL", "soon"],
            &["TYPE", "soon"],
            &["KEYS", "*"],
            &["SCAN", "0", "COUNT", "100"],
            &["DBSIZE"],
        ],
    );
    call(&mut m, &["CLIENT", "UNPAUSE"]);
    // Promotion: both become writable masters.
    same(
        &mut r,
        &mut h,
        &[
            &["REPLICAOF", "NO", "ONE"],
            &["SET", "x", "1"],
            &["GET", "x"],
        ],
    );
    assert_eq!(
        info_field(&mut h, "replication", "role").as_deref(),
        Some("master")
    );
    let Value::Array(role) = call(&mut h, &["ROLE"]) else {
        panic!("ROLE")
    };
    assert_eq!(role[0], Value::Bulk(b"master".to_vec()));
    // The master's id became the secondary id, as on Redis.
    assert_eq!(
        info_field(&mut h, "replication", "master_replid2"),
        info_field(&mut r, "replication", "master_replid2"),
    );
}

#[test]
fn a_replica_with_appendonly_keeps_the_synced_data_in_its_aof() {
    let master = start_redis(&["--repl-diskless-sync", "no"]);
    let mut m = Conn::connect(master.port);
    fill(&mut m);
    let dir = tempfile::tempdir().expect("temp dir");
    let dir_arg = dir.path().to_string_lossy().into_owned();
    // Data of its own first: the sync replaces it.
    {
        let own = start_hozon(&["--appendonly", "yes", "--dir", &dir_arg]);
        let mut c = Conn::connect(own.port);
        call(&mut c, &["SET", "own", "old"]);
    }
    let replica = hozon_replica(&master, &["--appendonly", "yes", "--dir", &dir_arg]);
    let mut h = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut h);
    call(&mut m, &["SET", "streamed", "yes"]);
    wait_caught_up(&mut m, &mut h);
    let expected = dataset(&mut m);
    assert_eq!(dataset(&mut h), expected);
    drop(h);
    drop(replica);
    // Restarted without a master, from its AOF alone.
    let restarted = start_hozon(&["--appendonly", "yes", "--dir", &dir_arg]);
    let mut c = Conn::connect(restarted.port);
    assert_eq!(dataset(&mut c), expected);
}

#[test]
fn slaveof_flag_and_masterauth_reach_a_master_with_a_password() {
    let master = start_redis(&["--requirepass", "secret"]);
    let port = master.port.to_string();
    let replica = start_hozon(&["--slaveof", "127.0.0.1", &port, "--masterauth", "secret"]);
    let mut m = Conn::connect(master.port);
    assert_eq!(
        call(&mut m, &["AUTH", "secret"]),
        Value::Simple("OK".into())
    );
    call(&mut m, &["SET", "k", "v"]);
    let mut h = Conn::connect(replica.port);
    wait_caught_up(&mut m, &mut h);
    assert_eq!(call(&mut h, &["GET", "k"]), Value::Bulk(b"v".to_vec()));
    assert_eq!(info_field(&mut h, "replication", "master_port"), Some(port));
}

/// docs/security.md's replication user: a hozon master whose default
/// user needs a password, and a user allowed only what a replica sends
/// (PSYNC, REPLCONF, PING). A redis-server replica and a hozon replica
/// log in as it with `masteruser`/`masterauth`, sync and stream, and the
/// master refuses nothing (ACL LOG stays empty).
#[test]
fn replicas_sync_as_the_documented_replication_user() {
    let master = start_hozon(&[
        "--requirepass",
        "secret",
        "--user",
        "replica-user",
        "on",
        ">rpw",
        "+psync",
        "+replconf",
        "+ping",
    ]);
    let port = master.port.to_string();
    let mut m = Conn::connect(master.port);
    assert_eq!(
        call(&mut m, &["AUTH", "secret"]),
        Value::Simple("OK".into())
    );
    call(&mut m, &["SET", "before", "1"]);
    let login = [
        "--replicaof",
        "127.0.0.1",
        &port,
        "--masteruser",
        "replica-user",
        "--masterauth",
        "rpw",
    ];
    let redis = start_redis(&login);
    let hozon = start_hozon(&login);
    call(&mut m, &["SET", "after", "2"]);
    for replica in [&redis, &hozon] {
        let mut r = Conn::connect(replica.port);
        wait_caught_up(&mut m, &mut r);
        assert_eq!(call(&mut r, &["GET", "before"]), Value::Bulk(b"1".to_vec()));
        assert_eq!(call(&mut r, &["GET", "after"]), Value::Bulk(b"2".to_vec()));
    }
    assert_eq!(call(&mut m, &["ACL", "LOG"]), Value::Array(Vec::new()));
}

#[test]
fn a_masterauth_set_after_replicaof_is_used_by_the_next_attempt_like_redis() {
    // Redis's unit/auth "MASTERAUTH test with binary password": REPLICAOF
    // first, the password after. Each connect attempt must send the
    // password in force then, not the one the link started with.
    let master = start_hozon(&[]);
    let port = master.port.to_string();
    let mut m = Conn::connect(master.port);
    call(&mut m, &["CONFIG", "SET", "requirepass", "abc\u{0}def"]);
    assert_eq!(
        call(&mut m, &["AUTH", "abc\u{0}def"]),
        Value::Simple("OK".into())
    );
    call(&mut m, &["SET", "k", "v"]);
    let redis = start_redis(&[]);
    let hozon = start_hozon(&[]);
    for replica in [&redis, &hozon] {
        let mut r = Conn::connect(replica.port);
        call(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
        call(&mut r, &["CONFIG", "SET", "masterauth", "abc"]);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            info_field(&mut r, "replication", "master_link_status").as_deref(),
            Some("down"),
            "a wrong masterauth let the link up"
        );
        call(&mut r, &["CONFIG", "SET", "masterauth", "abc\u{0}def"]);
        wait_caught_up(&mut m, &mut r);
        assert_eq!(call(&mut r, &["GET", "k"]), Value::Bulk(b"v".to_vec()));
    }
}

#[test]
fn masterdown_and_role_without_a_link_match_a_redis_replica() {
    // A port nobody listens on: the link never comes up.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    drop(listener);
    let args = [
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-serve-stale-data",
        "no",
    ];
    let redis = start_redis(&args);
    let hozon = start_hozon(&args);
    let (mut r, mut h) = (Conn::connect(redis.port), Conn::connect(hozon.port));
    std::thread::sleep(Duration::from_millis(300));
    same(
        &mut r,
        &mut h,
        &[
            &["GET", "a"],
            &["SET", "a", "1"],
            &["PING"],
            &["CONFIG", "GET", "replica-serve-stale-data"],
            &["CONFIG", "SET", "replica-serve-stale-data", "yes"],
            &["GET", "a"],
            &["ROLE"],
        ],
    );
    assert_eq!(
        info_field(&mut h, "replication", "master_link_status").as_deref(),
        Some("down")
    );
}

#[test]
fn blocked_clients_are_unblocked_when_the_server_becomes_a_replica() {
    let master = start_redis(&[]);
    let port = master.port.to_string();
    let mut replies = Vec::new();
    for server in [start_redis(&[]), start_hozon(&[])] {
        let mut blocked = Conn::connect(server.port);
        blocked.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n");
        std::thread::sleep(Duration::from_millis(100));
        let mut admin = Conn::connect(server.port);
        assert_eq!(
            call(&mut admin, &["REPLICAOF", "127.0.0.1", &port]),
            Value::Simple("OK".into())
        );
        // The error, then the connection closes.
        replies.push(String::from_utf8_lossy(&blocked.read_until_close()).into_owned());
    }
    assert!(replies[0].starts_with("-UNBLOCKED"), "{}", replies[0]);
    assert_eq!(replies[1], replies[0]);
}

/// Polls `cond` for up to `secs` seconds.
fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A writable replica (`replica-read-only no`) expires the keys its own
/// clients gave a TTL (the master will send no DEL for them), counts them
/// in `slave_expires_tracked_keys`, and a client's write deletes a key
/// past its TTL before writing, where a read only sees it absent: the
/// same as a redis-server replica of the same master.
#[test]
fn a_writable_replica_expires_its_own_keys_as_a_redis_replica_does() {
    // DEBUG SET-ACTIVE-EXPIRE below needs the DEBUG command (without it,
    // the master's active expiry sent DELs at a time of its own).
    let debug = ["--enable-debug-command", "yes"];
    let master = start_redis(&debug);
    let mut m = Conn::connect(master.port);
    let port = master.port.to_string();
    let writable = ["--replica-read-only", "no", debug[0], debug[1]];
    let redis_replica =
        start_redis(&[&["--replicaof", "127.0.0.1", &port][..], &writable].concat());
    let hozon_replica = hozon_replica(&master, &writable);
    let mut r = Conn::connect(redis_replica.port);
    let mut h = Conn::connect(hozon_replica.port);
    wait_caught_up(&mut m, &mut r);
    wait_caught_up(&mut m, &mut h);
    // TTLs of 3 s: the DBSIZE below must come before they pass, also on a
    // loaded machine (with 1 s, one replica's cron had sometimes expired
    // them and the other's not).
    same(
        &mut r,
        &mut h,
        &[
            &["SELECT", "5"],
            &["SET", "key1", "1", "EX", "3"],
            &["SET", "key2", "2", "PX", "3000"],
            &["SET", "key3", "3"],
            &["EXPIRE", "key3", "3"],
            &["SET", "kept", "4", "EX", "100"],
            &["DBSIZE"],
        ],
    );
    for conn in [&mut r, &mut h] {
        assert_eq!(
            info_field(conn, "stats", "slave_expires_tracked_keys").as_deref(),
            Some("4")
        );
    }
    // The replicas' crons delete the three keys past their TTL.
    for (name, conn) in [("redis", &mut r), ("hozon", &mut h)] {
        eventually(
            10,
            &format!("{name}: the replica's own keys did not expire"),
            || conn.call(&[b"DBSIZE"]) == b":1\r\n",
        );
        assert_eq!(
            info_field(conn, "stats", "slave_expires_tracked_keys").as_deref(),
            Some("1"),
            "{name}"
        );
    }
    // Keys from the master past their TTL (its active expiry off): a
    // read sees them absent, a write deletes and re-creates.
    same(&mut r, &mut h, &[&["DEL", "kept"]]);
    // Each cron forgets the deleted name; until then a key of that name
    // from the master could be expired by the replica's cron, at a time
    // of its own.
    for (name, conn) in [("redis", &mut r), ("hozon", &mut h)] {
        eventually(10, &format!("{name}: still remembers a name"), || {
            info_field(conn, "stats", "slave_expires_tracked_keys").as_deref() == Some("0")
        });
    }
    call(&mut m, &["SELECT", "5"]);
    assert_eq!(call(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    call(&mut m, &["SET", "key1", "5", "PX", "10"]);
    call(&mut m, &["SET", "key2", "5", "PX", "10"]);
    wait_caught_up(&mut m, &mut r);
    wait_caught_up(&mut m, &mut h);
    std::thread::sleep(Duration::from_millis(50));
    // Both replicas keep the master's keys past their TTL until its DELs
    // (which its active expiry, off, will not send).
    for (name, conn) in [("redis", &mut r), ("hozon", &mut h)] {
        let size = conn.call(&[b"DBSIZE"]);
        if size != b":2\r\n" {
            let stats = String::from_utf8_lossy(&conn.call(&[b"INFO", b"all"])).into_owned();
            panic!("{name}: DBSIZE {}\n{stats}", String::from_utf8_lossy(&size));
        }
    }
    same(
        &mut r,
        &mut h,
        &[
            &["DBSIZE"],
            &["EXISTS", "key1", "key2"],
            &["INCR", "key1"],
            &["TTL", "key1"],
            &["GET", "key2"],
            &["DBSIZE"],
            &["SET", "t", "1", "EX", "100"],
            &["FLUSHALL"],
        ],
    );
    // FLUSHALL forgets the remembered names.
    for conn in [&mut r, &mut h] {
        assert_eq!(
            info_field(conn, "stats", "slave_expires_tracked_keys").as_deref(),
            Some("0")
        );
    }
    // A time already past keeps the key on a replica (Redis's
    // checkAlreadyExpired): a read sees it absent, DBSIZE counts it. The
    // replicas' crons would expire these remembered keys at times of
    // their own (between the EXPIRE and the DBSIZE, now and then): off.
    for conn in [&mut r, &mut h] {
        assert_eq!(call(conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    }
    same(
        &mut r,
        &mut h,
        &[
            &["SET", "p", "1"],
            &["PEXPIREAT", "p", "1"],
            &["SET", "g", "1"],
            &["GETEX", "g", "PXAT", "1"],
            &["SET", "e", "1"],
            &["EXPIRE", "e", "-5"],
            &["DBSIZE"],
            &["GET", "p"],
            &["FLUSHALL"],
        ],
    );
    assert_eq!(call(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), ok());
}

/// The `+OK` reply.
fn ok() -> Value {
    Value::Simple("OK".into())
}
