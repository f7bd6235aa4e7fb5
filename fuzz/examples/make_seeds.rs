//! Writes the starting corpus of every target into `fuzz/corpus/<target>/`
//! (docs/fuzzing.md): requests, logs, dumps and payloads the library
//! itself writes for a keyspace of every type, and the RDB fixtures.
//! Run: `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hozon::persist::aof::{annotation_line, encode_command, FILE_HEADER};
use hozon::persist::io::FaultyIo;
use hozon::persist::snapshot;
use hozon::{Config, Engine, Reply};

/// Commands that build a keyspace of every type and encoding.
const SCRIPT: &[&[&str]] = &[
    &["SET", "s", "hello"],
    &["SET", "n", "12345"],
    &["SET", "t", "v", "PX", "100000000"],
    &["RPUSH", "l", "a", "b", "1", "-7", "ccc"],
    &["HSET", "h", "f", "v", "g", "2"],
    &["SADD", "si", "1", "2", "300", "-4"],
    &["SADD", "ss", "x", "y", "z"],
    &["ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"],
    &["XADD", "x", "1-1", "f", "v"],
    &["XADD", "x", "2-1", "f", "w", "g", "u"],
    &["XGROUP", "CREATE", "x", "grp", "0"],
    &[
        "XREADGROUP",
        "GROUP",
        "grp",
        "c1",
        "COUNT",
        "1",
        "STREAMS",
        "x",
        ">",
    ],
    &["SELECT", "3"],
    &["SET", "other", "db"],
    &["EXPIRE", "other", "1000"],
];

fn out_dir(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("create the corpus directory");
    dir
}

fn write(target: &str, name: &str, data: &[u8]) {
    std::fs::write(out_dir(target).join(name), data).expect("write a seed");
}

fn resp(commands: &[&[&str]]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in commands {
        encode_command(&mut out, c);
    }
    out
}

fn main() {
    let script = resp(SCRIPT);
    // resp_request: control byte, then what a client sends.
    write(
        "resp_request",
        "multibulk",
        &[&[0x40][..], &script].concat(),
    );
    write("resp_request", "split", &[&[0x02][..], &script].concat());
    write(
        "resp_request",
        "inline",
        b"\x40SET k \"a\\x41\\n\" 'it''s'\r\nGET k\n\r\n  PING  \r\n",
    );
    write(
        "resp_request",
        "frames",
        b"\x40*2\r\n$3\r\nfoo\r\n%1\r\n+a\r\n:1\r\n",
    );
    write(
        "resp_request",
        "resp3",
        b"\x40|1\r\n+k\r\n,1.5\r\n~1\r\n(12\r\n",
    );
    // command_args: requests.
    write("command_args", "script", &script);
    write(
        "command_args",
        "options",
        &resp(&[
            &["HELLO", "3"],
            &["SET", "k", "1", "NX", "GET", "EXAT", "99999999999"],
            &["ZADD", "z", "GT", "CH", "INCR", "1", "m"],
            &[
                "ZRANGE", "z", "(1", "+inf", "BYSCORE", "REV", "LIMIT", "0", "1",
            ],
            &["MULTI"],
            &["INCRBYFLOAT", "k", "1e3"],
            &["EXEC"],
            &["XADD", "x", "MAXLEN", "~", "10", "*", "f", "v"],
            &["BLPOP", "nolist", "0.1"],
            &["OBJECT", "ENCODING", "z"],
            &["SCAN", "0", "MATCH", "*", "COUNT", "10", "TYPE", "zset"],
        ]),
    );
    // A keyspace of every type, for the files below.
    let mut engine = Engine::open(Config::in_memory()).expect("an in-memory engine");
    engine.set_capture_effects(true);
    let mut session = engine.new_session();
    for c in SCRIPT {
        let argv: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        let reply = engine.execute(&mut session, &argv);
        assert!(!reply.is_error(), "{c:?}: {reply:?}");
    }
    // aof_load: control byte 1 (batches separated by `\n--\n`) and 0 (a
    // Redis-style plain log).
    let half = SCRIPT.len() / 2;
    let batched = [
        &[1u8][..],
        &resp(&SCRIPT[..half]),
        b"\n--\n",
        &resp(&SCRIPT[half..]),
    ]
    .concat();
    write("aof_load", "batched", &batched);
    write(
        "aof_load",
        "plain",
        &[&[0u8][..], b"#TS:1700000000\r\n", &script].concat(),
    );
    write(
        "aof_load",
        "multi",
        &[
            &[0u8][..],
            &resp(&[&["MULTI"], &["SET", "a", "1"], &["EXEC"]]),
            b"*2\r\n$3\r\nGET",
        ]
        .concat(),
    );
    // snapshot_read: the keyspace saved as a dump.hoz.
    let io = Arc::new(FaultyIo::new());
    let dir = Path::new("/seeds");
    snapshot::save_keyspace(engine.keyspace(), 0, io.clone(), dir, "dump.hoz")
        .expect("save a dump.hoz");
    let hoz = io
        .contents(&dir.join("dump.hoz"))
        .expect("the saved dump.hoz");
    write("snapshot_read", "every_type.hoz", &hoz);
    // The same keys as block payloads (the check frames them).
    let mut builder = snapshot::BlockBuilder::new();
    for db in 0..16 {
        for (k, v) in engine.keyspace().db(db).iter() {
            assert!(builder.push(db, k, v, None).is_empty(), "one block");
        }
    }
    let block = builder.finish().expect("a block of every type");
    let records = u8::try_from(block.records).expect("fewer than 256 keys");
    write(
        "snapshot_read",
        "every_type.blocks",
        &[&[records][..], &block.data].concat(),
    );
    // Two records with access records (format 1.4): an LRU idle time and
    // an LFU counter on a key with an expiry.
    write(
        "snapshot_read",
        "access_records.blocks",
        &[
            &[2u8, 0x80, 0, 1, b'k', 1, 0x64, 1, b'v'][..],
            &[0x90, 0, 1, b'f', 0, 2, 7, 1, b'w'][..],
        ]
        .concat(),
    );
    let empty = Engine::open(Config::in_memory()).expect("an in-memory engine");
    snapshot::save_keyspace(empty.keyspace(), 0, io.clone(), dir, "empty.hoz")
        .expect("save a dump.hoz");
    write(
        "snapshot_read",
        "empty.hoz",
        &io.contents(&dir.join("empty.hoz")).expect("saved"),
    );
    // rdb_read: the keyspace as an RDB, and every fixture (control byte
    // 0: the checksum is recomputed).
    let keys: Vec<_> = (0..16)
        .flat_map(|db| {
            engine
                .keyspace()
                .db(db)
                .iter()
                .map(move |(k, v)| (db, k.clone(), v.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let rdb = hozon::rdb::writer::encode_file(
        &hozon::rdb::writer::Encoder::default(),
        0,
        keys.iter().map(|(db, k, v)| (*db, k, v, None)),
    );
    write("rdb_read", "every_type.rdb", &[&[0u8][..], &rdb].concat());
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rdb");
    for entry in std::fs::read_dir(&fixtures).expect("fixtures/rdb") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "rdb") {
            let data = std::fs::read(&path).expect("a fixture");
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            write("rdb_read", &name, &[&[0u8][..], &data].concat());
        }
    }
    // repair_salvage: an AOF (0), an RDB (1), a dump.hoz (2).
    let aof = aof_of(&[resp(&SCRIPT[..half]), resp(&SCRIPT[half..])]);
    write(
        "repair_salvage",
        "batched.aof",
        &[&[0u8][..], &aof].concat(),
    );
    write(
        "repair_salvage",
        "plain.aof",
        &[&[0u8][..], &script].concat(),
    );
    write(
        "repair_salvage",
        "every_type.rdb",
        &[&[1u8][..], &rdb].concat(),
    );
    write(
        "repair_salvage",
        "every_type.hoz",
        &[&[2u8][..], &hoz].concat(),
    );
    // dump_restore: DUMP payloads without their footer (control byte 0
    // puts a version 10 footer back).
    engine.execute(&mut session, &[b"SELECT", b"0"]);
    for key in ["s", "n", "l", "h", "si", "ss", "z", "x"] {
        let Reply::Bulk(payload) = engine.execute(&mut session, &[b"DUMP", key.as_bytes()]) else {
            panic!("DUMP {key}");
        };
        let body = &payload[..payload.len() - 10];
        write("dump_restore", key, &[&[0u8][..], body].concat());
    }
}

/// A hozon AOF of `bodies`, each a verified batch.
fn aof_of(bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut out = FILE_HEADER.to_vec();
    for (i, body) in bodies.iter().enumerate() {
        out.extend_from_slice(body);
        out.extend_from_slice(&annotation_line(body, 1_700_000_000_000 + i as i64));
    }
    out
}
