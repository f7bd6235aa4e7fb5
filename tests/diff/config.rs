//! Differential tests of CONFIG GET, SET, RESETSTAT and REWRITE's
//! replies and errors against redis-server 7.0 (what CONFIG REWRITE writes
//! is in config_rewrite.rs).

use super::server::{assert_same_info, pairs, parse, text};
use crate::harness::{show, Conn, Pair};

/// Servers with the same log level (the harness runs Redis at `warning`).
pub(super) fn config_pair() -> Pair {
    Pair::with_args(&[], &["--loglevel", "warning"])
}

const CONFIG_SCRIPT: &str = "
CONFIG
CONFIG FOO
CONFIG HELP
config help
CONFIG HELP x
CONFIG GET
CONFIG GET nosuch
CONFIG GET maxclients
CONFIG GET MAXCLIENTS
CONFIG GET maxclients MaxClients maxclients
CONFIG GET hash-max-ziplist-entries
CONFIG GET HASH-MAX-ZIPLIST-ENTRIES nosuch
CONFIG GET timeout
CONFIG GET tcp-keepalive
CONFIG GET databases
CONFIG GET hz
CONFIG GET loglevel
CONFIG GET appendonly
CONFIG GET appendfsync
CONFIG GET appendfilename
CONFIG GET save
CONFIG GET protected-mode
CONFIG GET requirepass
CONFIG GET proto-max-bulk-len
CONFIG GET client-query-buffer-limit
CONFIG GET maxmemory
CONFIG GET maxmemory-policy
CONFIG GET busy-reply-threshold
CONFIG GET lua-time-limit
CONFIG GET list-max-ziplist-size
CONFIG GET list-max-listpack-size
CONFIG GET zset-max-listpack-value
CONFIG GET set-max-intset-entries
CONFIG GET aof-load-truncated
CONFIG GET stop-writes-on-bgsave-error
CONFIG GET daemonize
CONFIG GET logfile
CONFIG GET bind
CONFIG GET replicaof
CONFIG GET SLAVEOF
CONFIG GET replicaof REPLICAOF
CONFIG SET replicaof \"127.0.0.1 1\"
CONFIG SET slaveof x
CONFIG SET nosuch 1 replicaof x
CONFIG SET
CONFIG SET timeout
CONFIG SET timeout 1 hz
CONFIG SET foo bar
CONFIG SET foo bar timeout 5
CONFIG SET timeout abc foo bar
CONFIG SET databases 5 foo bar
CONFIG SET timeout 1 timeout 2
CONFIG SET timeout 1 TIMEOUT 2
CONFIG SET databases 5
CONFIG SET DATABASES 5
CONFIG SET dir /tmp
CONFIG SET dbfilename x.rdb
CONFIG SET appendfilename x.aof
CONFIG SET daemonize yes
CONFIG SET logfile /tmp/x
CONFIG SET port 99999
CONFIG SET port -1
CONFIG SET port abc
CONFIG SET maxclients -1
CONFIG SET maxclients 0
CONFIG SET maxclients 4294967296
CONFIG SET maxclients 1.5
CONFIG SET protected-mode maybe
CONFIG SET appendonly maybe
CONFIG SET appendfsync sometimes
CONFIG SET loglevel loud
CONFIG SET maxmemory-policy lru
CONFIG SET proto-max-bulk-len 1k
CONFIG SET proto-max-bulk-len abc
CONFIG SET proto-max-bulk-len -1
CONFIG SET client-query-buffer-limit 1
CONFIG SET hash-max-ziplist-entries abc
CONFIG SET hash-max-listpack-value -1
CONFIG SET HZ abc
CONFIG SET save 1
CONFIG SET save \"100 x\"
CONFIG SET save \"0 1\"
CONFIG SET save \"100  1\"
CONFIG SET timeout 5 hz 20
CONFIG GET timeout
CONFIG GET hz
CONFIG SET timeout 6 hz abc
CONFIG GET timeout
CONFIG SET hz 0
CONFIG GET hz
CONFIG SET hz 100000
CONFIG GET hz
CONFIG SET hz 10
CONFIG SET maxclients 100
CONFIG GET maxclients
CONFIG SET MaxClients 10000
CONFIG SET hash-max-ziplist-entries 100 zset-max-ziplist-value 1kb
CONFIG GET hash-max-listpack-entries
CONFIG GET zset-max-listpack-value
CONFIG SET list-max-ziplist-size -3
CONFIG GET list-max-listpack-size
CONFIG SET proto-max-bulk-len 2mb
CONFIG GET proto-max-bulk-len
CONFIG SET proto-max-bulk-len 536870912
CONFIG SET client-query-buffer-limit 1GB
CONFIG GET client-query-buffer-limit
CONFIG SET appendfsync ALWAYS
CONFIG GET appendfsync
CONFIG SET appendfsync everysec
CONFIG SET protected-mode no
CONFIG GET protected-mode
CONFIG SET protected-mode yes
CONFIG SET loglevel verbose
CONFIG GET loglevel
CONFIG SET loglevel warning
CONFIG SET maxmemory-policy allkeys-lru
CONFIG GET maxmemory-policy
CONFIG SET maxmemory-policy noeviction
CONFIG SET maxmemory 0
CONFIG SET tcp-keepalive 60
CONFIG GET tcp-keepalive
CONFIG SET busy-reply-threshold 100
CONFIG GET lua-time-limit
CONFIG SET lua-time-limit 5000
CONFIG SET aof-load-truncated no stop-writes-on-bgsave-error no
CONFIG GET aof-load-truncated
CONFIG GET stop-writes-on-bgsave-error
CONFIG SET save \"\"
CONFIG GET save
CONFIG SET appendonly no
CONFIG SET timeout 0
CONFIG RESETSTAT
CONFIG RESETSTAT x
CONFIG REWRITE
CONFIG REWRITE x
";

#[test]
fn config_get_set_and_their_errors() {
    let mut p = config_pair();
    p.script(CONFIG_SCRIPT);
    p.resp3();
    p.script(CONFIG_SCRIPT);
}

/// `replicaof` (`slaveof`) reports the master followed now, as Redis's
/// special parameter does: empty on a master, "host port" after REPLICAOF.
#[test]
fn config_get_replicaof_is_the_current_master() {
    let mut p = config_pair();
    p.script(
        "CONFIG GET replicaof
        REPLICAOF 127.0.0.1 1
        CONFIG GET replicaof
        CONFIG GET slaveof
        REPLICAOF NO ONE
        CONFIG GET slaveof",
    );
    let (r, h) = p.both(&["CONFIG", "GET", "*of"]);
    assert_eq!(config_pairs(&r), config_pairs(&h));
}

/// CONFIG GET pairs as a sorted list (Redis's order is its hash table's).
pub(super) fn config_pairs(reply: &[u8]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = pairs(&parse(reply))
        .iter()
        .map(|(k, v)| (text(k), text(v)))
        .collect();
    all.sort();
    all
}

#[test]
fn config_get_patterns_match_redis_for_known_parameters() {
    let mut p = config_pair();
    let hozon_names: Vec<String> = config_pairs(&p.hozon(&["CONFIG", "GET", "*"]))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    // Ours by nature: dir, dbfilename (dump.hoz); ports differ per server.
    // Values that differ by design, and hozon's own `aof-preamble`,
    // `snapshot-format` and `busy-poll-us`.
    let ours = [
        "dir",
        "dbfilename",
        "port",
        "aof-preamble",
        "snapshot-format",
        "busy-poll-us",
    ];
    for resp3 in [false, true] {
        if resp3 {
            p.resp3();
        }
        for patterns in [
            &["*"][..],
            &["*max-*-entries*"],
            &["*MAX*"],
            &["hash-*", "zset-*"],
            &["h?"],
            &["[a-c]*"],
            &["*", "port"],
            &["maxclients", "*clients"],
            &["timeout", "tcp-keepalive", "TIMEOUT"],
            &["*ziplist*"],
            &["nosuch*"],
            &["*of"],
            &["slave*", "replica*"],
        ] {
            let mut args = vec!["CONFIG", "GET"];
            args.extend(patterns);
            let (r, h) = p.both(&args);
            assert_eq!(r.first(), h.first(), "{patterns:?}: reply type");
            let theirs: Vec<(String, String)> = config_pairs(&r)
                .into_iter()
                .filter(|(k, _)| hozon_names.contains(k) && !ours.contains(&k.as_str()))
                .collect();
            let mine: Vec<(String, String)> = config_pairs(&h)
                .into_iter()
                .filter(|(k, _)| !ours.contains(&k.as_str()))
                .collect();
            assert_eq!(theirs, mine, "{patterns:?}");
        }
    }
    // `dir` is the harness's temporary directory, as given.
    let names = config_pairs(&p.hozon(&["CONFIG", "GET", "dbfilename", "dir"]));
    assert_eq!(names[0], ("dbfilename".into(), "dump.hoz".into()));
    assert_eq!(names[1].0, "dir");
    assert!(names[1].1.starts_with('/'), "{names:?}");
}

#[test]
fn config_set_applies_maxmemory_with_other_parameters() {
    // maxmemory was refused before eviction existed (docs/memory.md).
    let mut p = config_pair();
    p.check(&["CONFIG", "SET", "timeout", "7", "maxmemory", "1gb"]);
    p.check(&["CONFIG", "GET", "timeout"]);
    p.check(&["CONFIG", "GET", "maxmemory"]);
    p.check(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn config_set_applies_at_once() {
    let mut p = config_pair();
    // requirepass: new connections must authenticate.
    p.check(&["CONFIG", "SET", "requirepass", "pw"]);
    let (mut r, mut h) = p.connect_more();
    assert_eq!(
        show(&r.call(&[b"GET", b"k"])),
        show(&h.call(&[b"GET", b"k"]))
    );
    assert_eq!(
        show(&r.call(&[b"AUTH", b"pw"])),
        show(&h.call(&[b"AUTH", b"pw"]))
    );
    p.check(&["CONFIG", "SET", "requirepass", ""]);
    // Encoding thresholds.
    p.script(
        "CONFIG SET hash-max-listpack-entries 2\nHSET h a 1 b 2\nOBJECT ENCODING h\nHSET h c 3\nOBJECT ENCODING h\n\
         CONFIG SET set-max-intset-entries 2\nSADD s 1 2 3\nOBJECT ENCODING s",
    );
    // RESETSTAT clears the counters INFO reports.
    p.script("GET nosuch\nGET h");
    p.check(&["CONFIG", "RESETSTAT"]);
    let (r, h) = p.both(&["INFO", "stats"]);
    assert_same_info(&r, &h, "INFO stats after RESETSTAT");
}

#[test]
fn config_set_port_moves_the_listener() {
    let p = Pair::with_args(&[], &["--loglevel", "warning"]);
    let mut h = Conn::connect(p.hozon_server.port);
    let new_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("addr").port()
    };
    let reply = h.call(&[b"CONFIG", b"SET", b"port", new_port.to_string().as_bytes()]);
    assert_eq!(show(&reply), "+OK\\r\\n");
    let mut moved = Conn::connect(new_port);
    assert_eq!(moved.call(&[b"PING"]), b"+PONG\r\n");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", p.hozon_server.port)).is_err(),
        "the old port is closed"
    );
    // Existing connections stay.
    assert_eq!(h.call(&[b"PING"]), b"+PONG\r\n");
    // A port in use is refused and the server keeps listening where it was.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy_port = busy.local_addr().expect("addr").port().to_string();
    let reply = h.call(&[b"CONFIG", b"SET", b"port", busy_port.as_bytes()]);
    assert_eq!(
        show(&reply),
        show(b"-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.\r\n")
    );
    assert_eq!(Conn::connect(new_port).call(&[b"PING"]), b"+PONG\r\n");
}
