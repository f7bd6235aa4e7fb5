//! Every encoding, by hand, and value-level damage.

use super::*;

/// Bytes that need escaping, and every high byte.
fn binary_bytes() -> Vec<u8> {
    let mut v = b"q\"b\\s\x00\x01\x1f\x7f".to_vec();
    v.extend(0x80u8..=0xff);
    v
}

/// A file with one key of every encoding (and expiries, several
/// databases, the opcodes files carry between keys).
fn every_encoding_file() -> Vec<u8> {
    let bin = binary_bytes();
    let long_text = "the quick brown fox jumps over the lazy dog ".repeat(40);
    let long = long_text.as_bytes();
    let mut f = Rdb::new(12);
    f.aux("redis-ver", b"7.4.0")
        .aux("ctime", b"1700000000")
        .aux("aof-base", b"0");
    // Module AUX data (kept in the file, skipped by loaders).
    let mut module_aux = vec![opcode::MODULE_AUX];
    module_aux.extend(len(0x1234_5678_9ABC_0001));
    module_aux.extend(len(2));
    module_aux.extend(len(1));
    module_aux.extend(len(5));
    module_aux.extend(raw(b"aux"));
    module_aux.extend(len(0));
    f.raw(&module_aux);
    f.raw(&[opcode::FUNCTION2]).raw(&raw(
        b"#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    ));
    f.select(0).resize(40, 4);
    // Strings.
    f.key(kind::STRING, b"str:raw", &raw(b"hello world"));
    f.key(kind::STRING, b"str:empty", &raw(b""));
    f.key(kind::STRING, b"str:int8", &int_encoded(-7));
    f.key(kind::STRING, b"str:int8max", &int_encoded(127));
    f.key(kind::STRING, b"str:int16", &int_encoded(-30000));
    f.key(kind::STRING, b"str:int32", &int_encoded(2_000_000_000));
    f.key(
        kind::STRING,
        b"str:int32min",
        &int_encoded(i64::from(i32::MIN)),
    );
    f.key(
        kind::STRING,
        b"str:lzf",
        &lzf_string(long).expect("text compresses"),
    );
    f.key(kind::STRING, b"str:bin", &raw(&bin));
    f.key(kind::STRING, b"str:big", &raw(&vec![b'x'; 20_000]));
    f.key(kind::STRING, b"str:notint", &raw(b"007"));
    // Keys stored as integers and compressed.
    f.record(kind::STRING, &int_encoded(12345), &raw(b"an integer key"));
    f.record(
        kind::STRING,
        &lzf_string(long).expect("compresses"),
        &raw(b"an LZF key"),
    );
    f.key(kind::STRING, &bin, &raw(b"a binary key"));
    f.key(kind::STRING, b"", &raw(b"the empty key"));
    f.expire_ms(FUTURE_MS)
        .key(kind::STRING, b"str:ttl", &raw(b"lives"));
    f.expire_ms(PAST_MS)
        .key(kind::STRING, b"str:expired", &raw(b"gone"));
    f.expire_s(2_000_000_000)
        .key(kind::STRING, b"str:ttl_s", &raw(b"seconds"));
    f.raw(&[opcode::IDLE]).raw(&len(1234));
    f.key(kind::STRING, b"str:idle", &raw(b"idle"));
    f.raw(&[opcode::FREQ, 9]);
    f.key(kind::STRING, b"str:freq", &raw(b"freq"));
    f.raw(&[opcode::SLOT_INFO])
        .raw(&len(5))
        .raw(&len(10))
        .raw(&len(2));
    // Lists.
    f.key(
        kind::LIST,
        b"list:plain",
        &v_list(&[b"a", b"", b"12", &bin, long]),
    );
    f.key(
        kind::LIST_ZIPLIST,
        b"list:ziplist",
        &v_blob(&ziplist(&[
            s("a"),
            It::I(0),
            It::I(12),
            It::I(13),
            It::I(-128),
            It::I(127),
            It::I(-32768),
            It::I(8_000_000),
            It::I(-2_000_000_000),
            It::I(i64::MIN),
            It::I(i64::MAX),
            s(""),
            It::S(bin.clone()),
            It::S(vec![b'z'; 300]),
            It::S(vec![b'y'; 17_000]),
        ])),
    );
    f.key(
        kind::LIST_QUICKLIST,
        b"list:quicklist",
        &v_quicklist(&[
            vec![s("n1a"), It::I(1)],
            vec![It::S(long.to_vec())],
            vec![s("n3"), It::I(-5), s("12x")],
        ]),
    );
    f.key(
        kind::LIST_QUICKLIST_2,
        b"list:quicklist2",
        &v_quicklist2(&[
            Node::Packed(vec![
                s("p1"),
                It::I(100),
                It::I(-4096),
                It::I(4095),
                It::I(-32768),
                It::I(-8_388_608),
                It::I(8_388_607),
                It::I(i64::from(i32::MAX)),
                It::I(i64::MIN),
            ]),
            Node::Plain(bin.clone()),
            Node::Packed(vec![It::S(vec![b'w'; 100]), It::S(vec![b'v'; 5000])]),
            Node::Plain(b"".to_vec()),
        ]),
    );
    // Sets.
    f.key(
        kind::SET,
        b"set:plain",
        &v_list(&[b"b", b"a", &bin, b"", long]),
    );
    f.key(
        kind::SET,
        b"set:ints",
        &v_list(&[b"10", b"9", b"-1", b"100"]),
    );
    f.key(
        kind::SET,
        b"set:noncanonical",
        &v_list(&[b"1", b"01", b"-0", b"0", b"+1", b" 1"]),
    );
    f.key(
        kind::SET_INTSET,
        b"set:intset16",
        &v_blob(&intset::encode(&[-3, 9, 10, 100])),
    );
    f.key(
        kind::SET_INTSET,
        b"set:intset32",
        &v_blob(&intset::encode(&[-70_000, 1, 70_000])),
    );
    f.key(
        kind::SET_INTSET,
        b"set:intset64",
        &v_blob(&intset::encode(&[i64::MIN, -1, 0, i64::MAX])),
    );
    f.key(
        kind::SET_INTSET,
        b"set:intset_wide",
        &v_blob(&intset_raw(8, &[2, 3, 10])),
    );
    f.key(
        kind::SET_LISTPACK,
        b"set:listpack",
        &v_blob(&listpack(&[
            s("b"),
            It::I(10),
            It::I(9),
            s("a"),
            It::S(bin.clone()),
        ])),
    );
    f.key(
        kind::SET_LISTPACK,
        b"set:listpack_ints",
        &v_blob(&listpack(&[
            It::I(10),
            It::I(9),
            It::I(-5),
            It::I(1_000_000),
        ])),
    );
    // Integers stored as strings in the listpack count as the same text.
    f.key(
        kind::SET_LISTPACK,
        b"set:listpack_mixed",
        &v_blob(&listpack(&[s("7"), It::I(8), s("07")])),
    );
    // Sorted sets.
    let scores: &[(&[u8], f64)] = &[
        (b"inf", f64::INFINITY),
        (b"ninf", f64::NEG_INFINITY),
        (b"one", 1.0),
        (b"tenth", 0.1),
        (b"big", 1e17),
        (b"small", 1e-5),
        (b"smaller", 1e-6),
        (b"tiny", 5e-324),
        (b"huge", f64::MAX),
        (b"neg", -2.5),
        (b"zero", 0.0),
        (b"negzero", -0.0),
        (b"same_b", 3.0),
        (b"same_a", 3.0),
        (b"int", 12.0),
        (b"2^53", 9_007_199_254_740_992.0),
        (&bin, 7.25),
    ];
    f.key(kind::ZSET, b"zset:text", &v_zset3(scores));
    f.key(kind::ZSET_2, b"zset:binary", &v_zset5(scores));
    f.key(
        kind::ZSET_ZIPLIST,
        b"zset:ziplist",
        &v_blob(&ziplist(&scored_items(scores, false))),
    );
    f.key(
        kind::ZSET_LISTPACK,
        b"zset:listpack",
        &v_blob(&listpack(&scored_items(scores, false))),
    );
    f.key(
        kind::ZSET_LISTPACK,
        b"zset:listpack_text",
        &v_blob(&listpack(&scored_items(scores, true))),
    );
    // Scores as text in forms strtod reads.
    f.key(
        kind::ZSET_LISTPACK,
        b"zset:listpack_forms",
        &v_blob(&listpack(&[
            s("a"),
            s("1.50"),
            s("b"),
            s("+inf"),
            s("c"),
            s("-infinity"),
            s("d"),
            s("0x10"),
            s("e"),
            s("1e400"),
            It::I(5),
            It::I(-3),
        ])),
    );
    // A sorted set too large for a listpack (a skiplist in the model).
    let many: Vec<(Vec<u8>, f64)> = (0..300)
        .map(|i| (format!("m{i}").into_bytes(), f64::from(i % 17) - 8.5))
        .collect();
    let many_ref: Vec<(&[u8], f64)> = many.iter().map(|(m, sc)| (&m[..], *sc)).collect();
    f.key(kind::ZSET_2, b"zset:skiplist", &v_zset5(&many_ref));
    f.key(
        kind::ZSET_LISTPACK,
        b"zset:listpack_large",
        &v_blob(&listpack(&scored_items(&many_ref, false))),
    );
    // Hashes.
    let pairs: &[(&[u8], &[u8])] = &[
        (b"b", b"2"),
        (b"a", b"1"),
        (b"10", b"ten"),
        (b"9", b"nine"),
        (&bin, &bin),
        (b"", b""),
        (b"long", long),
    ];
    f.key(kind::HASH, b"hash:plain", &v_hash4(pairs));
    f.key(
        kind::HASH_ZIPMAP,
        b"hash:zipmap",
        &v_blob(&zipmap(
            &[
                (b"f".to_vec(), b"v".to_vec()),
                (b"e".to_vec(), b"".to_vec()),
                (vec![b'k'; 300], vec![b'w'; 400]),
            ],
            0,
        )),
    );
    f.key(
        kind::HASH_ZIPMAP,
        b"hash:zipmap_free",
        &v_blob(&zipmap(
            &[
                (b"x".to_vec(), b"1".to_vec()),
                (b"y".to_vec(), b"22".to_vec()),
            ],
            3,
        )),
    );
    f.key(
        kind::HASH_ZIPLIST,
        b"hash:ziplist",
        &v_blob(&ziplist(&pairs_items(pairs))),
    );
    f.key(
        kind::HASH_LISTPACK,
        b"hash:listpack",
        &v_blob(&listpack(&pairs_items(pairs))),
    );
    let ttl_fields: &[(&[u8], &[u8], u64)] = &[
        (b"keep", b"1", 0),
        (b"later", b"2", FUTURE_MS as u64),
        (b"gone", b"3", PAST_MS as u64),
        (b"10", b"ten", FUTURE_MS as u64 + 5),
        (b"9", b"nine", 0),
    ];
    f.key(
        kind::HASH_METADATA_PRE_GA,
        b"hash:ttl22",
        &v_hash22(ttl_fields),
    );
    f.key(
        kind::HASH_LISTPACK_EX_PRE_GA,
        b"hash:ttl23",
        &v_hash23(ttl_fields),
    );
    f.key(kind::HASH_METADATA, b"hash:ttl24", &v_hash24(ttl_fields));
    f.key(kind::HASH_LISTPACK_EX, b"hash:ttl25", &v_hash25(ttl_fields));
    // Every field expired: the hash is not loaded.
    let expired_fields: &[(&[u8], &[u8], u64)] = &[(b"a", b"1", PAST_MS as u64)];
    f.key(
        kind::HASH_METADATA,
        b"hash:all_expired",
        &v_hash24(expired_fields),
    );
    let table: Vec<(Vec<u8>, Vec<u8>)> = (0..600)
        .map(|i| {
            (
                format!("field{i}").into_bytes(),
                format!("{}", i * 7).into_bytes(),
            )
        })
        .collect();
    let table_ref: Vec<(&[u8], &[u8])> = table.iter().map(|(a, b)| (&a[..], &b[..])).collect();
    f.key(kind::HASH, b"hash:table", &v_hash4(&table_ref));
    f.key(
        kind::HASH_LISTPACK,
        b"hash:listpack_large",
        &v_blob(&listpack(&pairs_items(&table_ref))),
    );
    // Module values and streams.
    f.key(kind::MODULE_2, b"module:value", &v_module());
    let st = StreamData {
        entries: vec![
            (
                (1_700_000_000_000, 0),
                vec![
                    (b"f".to_vec(), b"v1".to_vec()),
                    (b"g".to_vec(), b"1".to_vec()),
                ],
            ),
            (
                (1_700_000_000_000, 1),
                vec![
                    (b"f".to_vec(), b"v2".to_vec()),
                    (b"g".to_vec(), b"2".to_vec()),
                ],
            ),
            (
                (1_700_000_000_005, 0),
                vec![(bin.clone(), b"other".to_vec())],
            ),
            (
                (1_700_000_000_009, 3),
                vec![
                    (b"f".to_vec(), b"v4".to_vec()),
                    (b"g".to_vec(), b"4".to_vec()),
                ],
            ),
        ],
        deleted: [1].into_iter().collect(),
        groups: vec![(
            b"grp".to_vec(),
            (1_700_000_000_005, 0),
            vec![(0, 0), (2, 1)],
        )],
        consumers: vec![b"alice".to_vec(), b"bob".to_vec()],
    };
    f.key(
        kind::STREAM_LISTPACKS,
        b"stream:15",
        &v_stream(&st, kind::STREAM_LISTPACKS),
    );
    f.key(
        kind::STREAM_LISTPACKS_2,
        b"stream:19",
        &v_stream(&st, kind::STREAM_LISTPACKS_2),
    );
    f.key(
        kind::STREAM_LISTPACKS_3,
        b"stream:21",
        &v_stream(&st, kind::STREAM_LISTPACKS_3),
    );
    // Other databases, some expiring keys.
    f.select(1);
    f.expire_ms(FUTURE_MS + 1).key(
        kind::SET_INTSET,
        b"db1:set",
        &v_blob(&intset::encode(&[1, 2, 3])),
    );
    f.expire_ms(PAST_MS).key(
        kind::HASH_LISTPACK,
        b"db1:hash",
        &v_blob(&listpack(&[s("a"), s("b")])),
    );
    f.select(15);
    f.key(
        kind::LIST_ZIPLIST,
        b"db15:list",
        &v_blob(&ziplist(&[s("x")])),
    );
    f.select(1_000_000);
    f.key(kind::STRING, b"db_million", &raw(b"far"));
    f.finish()
}

/// Engine-written keys: every type as hozon's own RDB writer encodes it
/// (quicklist-2 lists, listpack and table hashes, intsets and tables,
/// listpack and skiplist sorted sets with binary scores, streams of type
/// 19 with groups).
fn engine_written_file() -> Vec<u8> {
    let mut engine = Engine::open(Config::in_memory()).expect("engine");
    let mut session = engine.new_session();
    session.authenticated = true;
    let mut exec = |words: Vec<Vec<u8>>| {
        let args: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let reply = engine.execute(&mut session, &args);
        assert!(!matches!(reply, Reply::Error(_)), "{reply:?}");
    };
    let w = |t: &str| t.as_bytes().to_vec();
    exec(vec![w("SET"), w("s"), binary_bytes()]);
    exec(vec![w("SET"), w("n"), w("-123456")]);
    exec(vec![w("SET"), w("long"), w(&"abc".repeat(100))]);
    let mut rpush = vec![w("RPUSH"), w("list")];
    rpush.extend((0..1000).map(|i| format!("item{i}").into_bytes()));
    exec(rpush);
    exec(vec![
        w("RPUSH"),
        w("small_list"),
        w("1"),
        w("b"),
        binary_bytes(),
    ]);
    exec(vec![
        w("HSET"),
        w("h"),
        w("b"),
        w("2"),
        w("a"),
        w("1"),
        binary_bytes(),
        w("x"),
    ]);
    let mut hset = vec![w("HSET"), w("big_h")];
    for i in 0..300 {
        hset.push(format!("f{i}").into_bytes());
        hset.push(format!("{}", i * 3).into_bytes());
    }
    exec(hset);
    exec(vec![w("SADD"), w("ints"), w("10"), w("9"), w("-1")]);
    exec(vec![w("SADD"), w("strs"), w("b"), w("a"), binary_bytes()]);
    let mut sadd = vec![w("SADD"), w("big_ints")];
    sadd.extend((0..700).map(|i| format!("{}", i * 13 - 500).into_bytes()));
    exec(sadd);
    exec(vec![
        w("ZADD"),
        w("z"),
        w("1.5"),
        w("a"),
        w("-inf"),
        w("b"),
        w("inf"),
        w("c"),
        w("1e-5"),
        w("d"),
        w("5e-324"),
        w("e"),
        w("1"),
        w("f"),
        w("1"),
        w("e2"),
    ]);
    let mut zadd = vec![w("ZADD"), w("big_z")];
    for i in 0..200 {
        zadd.push(format!("{}", f64::from(i % 9) * 1.25 - 3.0).into_bytes());
        zadd.push(format!("m{i}").into_bytes());
    }
    exec(zadd);
    for i in 0..5 {
        exec(vec![
            w("XADD"),
            w("st"),
            format!("5-{i}").into_bytes(),
            w("f"),
            format!("v{i}").into_bytes(),
        ]);
    }
    exec(vec![
        w("XADD"),
        w("st"),
        w("6-0"),
        w("other"),
        binary_bytes(),
    ]);
    exec(vec![w("XGROUP"), w("CREATE"), w("st"), w("g1"), w("0")]);
    exec(vec![
        w("XREADGROUP"),
        w("GROUP"),
        w("g1"),
        w("c1"),
        w("COUNT"),
        w("2"),
        w("STREAMS"),
        w("st"),
        w(">"),
    ]);
    exec(vec![w("XDEL"), w("st"), w("5-3")]);
    let encoder = Encoder {
        compress: true,
        list_max_listpack_size: 7,
        ..Encoder::default()
    };
    let mut f = Rdb::new(10);
    f.aux("redis-ver", b"7.0.15");
    f.select(0);
    let ks = engine.keyspace();
    let db = ks.db(0);
    let mut keys: Vec<_> = db.iter().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    for (i, (key, value)) in keys.into_iter().enumerate() {
        let expire = match i % 3 {
            0 => None,
            1 => Some(FUTURE_MS + i as i64),
            _ => Some(PAST_MS + i as i64),
        };
        let mut record = Vec::new();
        encoder.put_key(&mut record, key, value, expire);
        f.raw(&record);
    }
    f.finish()
}

#[test]
fn every_encoding_gives_the_same_output_both_ways_with_every_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        ("encodings.rdb", every_encoding_file()),
        ("engine.rdb", engine_written_file()),
    ];
    for (name, data) in &files {
        let path = write(dir.path(), name, data);
        let out = assert_agree(&path, &[]);
        assert_eq!(out.code, 0, "{name}: {}", shorten(&out.stderr));
        assert!(out.stderr.is_empty(), "{name}: {}", shorten(&out.stderr));
        for filters in FILTER_SETS {
            assert_agree(&path, filters);
        }
        for extra in [
            &["--db", "15"][..],
            &["--db", "1000000"],
            &["--match", "str:*"],
            &["--match", "*:t*"],
        ] {
            assert_agree(&path, extra);
        }
        // And from stdin.
        for format in FORMATS {
            same_both_ways(&export_args(format, &[], "-"), Some(data))
                .unwrap_or_else(|e| panic!("{name} on stdin: {e}"));
        }
    }
    // What the encodings file holds, as both paths print it: every key but
    // the module value (skipped by loaders; `keys` lists it) and the hash
    // whose fields all expired (not loaded; `keys` does not list it either).
    let path = dir.path().join("encodings.rdb");
    let out = assert_agree(&path, &[]);
    let lines: Vec<&str> = text(&out.stdout).lines().collect();
    let keys = Rdb::count_keys(&files[0].1);
    assert_eq!(lines.len(), keys - 1, "{}", text(&out.stdout));
    let line = |key: &str| -> &str {
        let head = format!(",\"key\":\"{key}\",");
        lines
            .iter()
            .find(|l| l.contains(&head))
            .unwrap_or_else(|| panic!("no key {key}"))
    };
    assert!(line("set:ints").ends_with(r#""value":["-1","10","100","9"]}"#));
    assert!(line("set:intset16").ends_with(r#""value":["-3","10","100","9"]}"#));
    assert!(line("set:noncanonical").ends_with(r#""value":[" 1","+1","-0","0","01","1"]}"#));
    assert!(line("set:listpack_mixed").ends_with(r#""value":["07","7","8"]}"#));
    assert!(line("str:int16").ends_with(r#""value":"-30000"}"#));
    assert!(line("12345").ends_with(r#""value":"an integer key"}"#));
    assert!(line("hash:ttl24")
        .ends_with(r#""value":[["10","ten"],["9","nine"],["keep","1"],["later","2"]]}"#));
    assert!(line("hash:zipmap_free").ends_with(r#""value":[["x","1"],["y","22"]]}"#));
    assert!(line("zset:listpack_forms").ends_with(
        r#""value":[["c","-inf"],["5",-3],["a",1.5],["d",16],["b","inf"],["e","inf"]]}"#
    ));
    let text_form = line("zset:text");
    assert!(text_form.contains(r#"["ninf","-inf"],["neg",-2.5],["negzero",-0],["zero",0],["tiny",5e-324],["smaller",1e-6],["small",0.00001],["tenth",0.1],["one",1],["same_a",3],["same_b",3]"#), "{text_form}");
    assert!(
        text_form.contains(r#"["big",1e17],["huge",1.7976931348623157e308],["inf","inf"]]}"#),
        "{text_form}"
    );
    // The same scores in every encoding; a member longer than 64 bytes
    // makes the plain types skiplists (-0 kept), a loaded ziplist or
    // listpack stays a listpack (-0 stored as 0).
    let value = |l: &str| l.split_once(",\"value\":").map(|x| x.1.to_string());
    let compact = value(text_form).map(|v| v.replace(r#"["negzero",-0]"#, r#"["negzero",0]"#));
    assert_eq!(value(line("zset:binary")), value(text_form));
    for z in ["zset:ziplist", "zset:listpack", "zset:listpack_text"] {
        assert_eq!(value(line(z)), compact, "{z}");
    }
    assert!(line("db_million").starts_with(r#"{"db":1000000,"#));
    assert!(line("str:ttl_s").contains(r#""expire_ms":2000000000000,"#));
    assert!(lines
        .iter()
        .any(|l| l.starts_with(r#"{"db":0,"key":"","type":"string""#)));
    assert!(line("stream:21").contains(r#""groups":[{"name":"grp""#));
}

impl Rdb {
    /// Key records in a file (the value-model path reads it).
    fn count_keys(data: &[u8]) -> usize {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write(dir.path(), "count.rdb", data);
        let out = run(&["keys", "--json", path.to_str().expect("UTF-8")], None);
        assert_eq!(out.code, 0, "{}", shorten(&out.stderr));
        text(&out.stdout).lines().count()
    }
}

/// One damaged (or unusual) value: its type byte and bytes, and whether
/// the loaders reject it (exit 1) or skip the key (an empty collection).
struct Case {
    name: &'static str,
    t: u8,
    value: Vec<u8>,
    rejected: bool,
}

fn case(name: &'static str, t: u8, value: Vec<u8>, rejected: bool) -> Case {
    Case {
        name,
        t,
        value,
        rejected,
    }
}

fn value_damage_cases() -> Vec<Case> {
    let lp = |items: &[It]| v_blob(&listpack(items));
    let zl = |items: &[It]| v_blob(&ziplist(items));
    let mut bad_total = listpack(&[s("a"), s("b")]);
    bad_total[0] += 1;
    let mut short_total = listpack(&[s("a"), s("b")]);
    short_total[0] -= 1;
    let mut no_terminator = listpack(&[s("a"), s("b")]);
    *no_terminator.last_mut().expect("terminator") = 0xFE;
    let mut bad_zl_tail = ziplist(&[s("a"), s("b")]);
    bad_zl_tail[4] += 1;
    let mut bad_zl_count = ziplist(&[s("a"), s("b")]);
    bad_zl_count[8] = 3;
    let mut bad_zipmap_count = zipmap(&[(b"a".to_vec(), b"1".to_vec())], 0);
    bad_zipmap_count[0] = 2;
    // LZF data whose first item is a back reference (to before the start).
    let bad_lzf = vec![0xC3, 2, 3, 0x20, 0x00];
    let mut lzf_long = vec![0xC3];
    lzf_long.extend(len(3));
    lzf_long.extend(len(1000));
    lzf_long.extend_from_slice(&[0x01, b'a', b'b']);
    vec![
        // Empty collections: Redis skips them.
        case("empty plain list", kind::LIST, len(0), false),
        case("empty plain set", kind::SET, len(0), false),
        case("empty plain zset", kind::ZSET, len(0), false),
        case("empty binary zset", kind::ZSET_2, len(0), false),
        case("empty plain hash", kind::HASH, len(0), false),
        case("empty ziplist list", kind::LIST_ZIPLIST, zl(&[]), false),
        case("empty set listpack", kind::SET_LISTPACK, lp(&[]), false),
        case("empty zset listpack", kind::ZSET_LISTPACK, lp(&[]), false),
        case("empty zset ziplist", kind::ZSET_ZIPLIST, zl(&[]), false),
        case("empty hash listpack", kind::HASH_LISTPACK, lp(&[]), false),
        case("empty hash ziplist", kind::HASH_ZIPLIST, zl(&[]), false),
        case("empty quicklist", kind::LIST_QUICKLIST, len(0), false),
        case("empty quicklist2", kind::LIST_QUICKLIST_2, len(0), false),
        case(
            "quicklist2 of empty nodes",
            kind::LIST_QUICKLIST_2,
            v_quicklist2(&[Node::Packed(vec![]), Node::Packed(vec![])]),
            false,
        ),
        case(
            "quicklist of an empty ziplist",
            kind::LIST_QUICKLIST,
            v_quicklist(&[vec![]]),
            false,
        ),
        // Empty compact encodings Redis rejects.
        case(
            "empty intset",
            kind::SET_INTSET,
            v_blob(&intset_raw(2, &[])),
            true,
        ),
        case("empty zipmap", kind::HASH_ZIPMAP, v_blob(&[0, 0xFF]), true),
        // Duplicates.
        case(
            "duplicate plain set members",
            kind::SET,
            v_list(&[b"a", b"b", b"a"]),
            true,
        ),
        case(
            "duplicate plain set integers",
            kind::SET,
            v_list(&[b"1", b"2", b"1"]),
            true,
        ),
        case(
            "duplicate set listpack members",
            kind::SET_LISTPACK,
            lp(&[s("x"), s("y"), s("x")]),
            true,
        ),
        case(
            "duplicate set listpack integers (an intset as listpack)",
            kind::SET_LISTPACK,
            lp(&[It::I(5), It::I(6), It::I(5)]),
            true,
        ),
        case(
            "set listpack: integer and its text",
            kind::SET_LISTPACK,
            lp(&[It::I(12), s("12")]),
            true,
        ),
        case(
            "intset with a repeated value",
            kind::SET_INTSET,
            v_blob(&intset_raw(2, &[1, 1])),
            true,
        ),
        case(
            "intset out of order",
            kind::SET_INTSET,
            v_blob(&intset_raw(4, &[5, 3])),
            true,
        ),
        case(
            "intset of width 3",
            kind::SET_INTSET,
            v_blob(&intset_raw(3, &[1, 2])),
            true,
        ),
        case(
            "duplicate plain hash fields",
            kind::HASH,
            v_hash4(&[(b"f", b"1"), (b"g", b"2"), (b"f", b"3")]),
            true,
        ),
        case(
            "duplicate hash listpack fields",
            kind::HASH_LISTPACK,
            lp(&[s("f"), s("1"), s("f"), s("2")]),
            true,
        ),
        case(
            "duplicate hash listpack integer fields",
            kind::HASH_LISTPACK,
            lp(&[It::I(7), s("1"), s("7"), s("2")]),
            true,
        ),
        case(
            "duplicate hash ziplist fields",
            kind::HASH_ZIPLIST,
            zl(&[s("f"), s("1"), s("f"), s("2")]),
            true,
        ),
        case(
            "duplicate zipmap fields",
            kind::HASH_ZIPMAP,
            v_blob(&zipmap(
                &[
                    (b"a".to_vec(), b"1".to_vec()),
                    (b"a".to_vec(), b"2".to_vec()),
                ],
                0,
            )),
            true,
        ),
        case(
            "duplicate hash fields with TTLs",
            kind::HASH_METADATA,
            v_hash24(&[(b"f", b"1", 0), (b"f", b"2", 0)]),
            true,
        ),
        case(
            "duplicate plain zset members",
            kind::ZSET_2,
            v_zset5(&[(b"m", 1.0), (b"n", 2.0), (b"m", 3.0)]),
            true,
        ),
        case(
            "duplicate text-score zset members",
            kind::ZSET,
            v_zset3(&[(b"m", 1.0), (b"m", 1.0)]),
            true,
        ),
        case(
            "duplicate zset listpack members",
            kind::ZSET_LISTPACK,
            lp(&[s("m"), It::I(1), s("m"), It::I(2)]),
            true,
        ),
        case(
            "duplicate zset ziplist members",
            kind::ZSET_ZIPLIST,
            zl(&[It::I(4), It::I(1), s("4"), It::I(1)]),
            true,
        ),
        // Scores.
        case(
            "NaN binary score",
            kind::ZSET_2,
            v_zset5(&[(b"a", 1.0), (b"b", f64::NAN)]),
            true,
        ),
        case(
            "NaN text score (253)",
            kind::ZSET,
            v_zset3(&[(b"a", f64::NAN)]),
            true,
        ),
        case(
            "NaN listpack score",
            kind::ZSET_LISTPACK,
            lp(&[s("a"), s("nan")]),
            true,
        ),
        case(
            "listpack score that is not a number",
            kind::ZSET_LISTPACK,
            lp(&[s("a"), s("12abc")]),
            true,
        ),
        case(
            "text score that is not a number",
            kind::ZSET,
            [len(1), raw(b"a"), vec![3], b"x1y".to_vec()].concat(),
            true,
        ),
        // Odd element counts.
        case(
            "odd hash listpack",
            kind::HASH_LISTPACK,
            lp(&[s("f"), s("1"), s("g")]),
            true,
        ),
        case("odd hash ziplist", kind::HASH_ZIPLIST, zl(&[s("f")]), true),
        case(
            "odd zset listpack",
            kind::ZSET_LISTPACK,
            lp(&[s("m"), It::I(1), s("n")]),
            true,
        ),
        case("odd zset ziplist", kind::ZSET_ZIPLIST, zl(&[s("m")]), true),
        case(
            "hash-with-TTL listpack not of triples",
            kind::HASH_LISTPACK_EX,
            [(-1i64).to_le_bytes().to_vec(), lp(&[s("f"), s("v")])].concat(),
            true,
        ),
        // Broken compact encodings.
        case(
            "listpack header counts 3 of 2",
            kind::SET_LISTPACK,
            v_blob(&listpack_counting(&[s("a"), s("b")], 3)),
            true,
        ),
        case(
            "listpack header counts 1 of 2",
            kind::LIST_QUICKLIST_2,
            [
                len(1),
                len(2),
                v_blob(&listpack_counting(&[s("a"), s("b")], 1)),
            ]
            .concat(),
            true,
        ),
        case(
            "hash listpack header counts 65535 (unknown): accepted",
            kind::HASH_LISTPACK,
            v_blob(&listpack_counting(&[s("a"), s("b")], 65535)),
            false,
        ),
        case(
            "listpack total bytes too large",
            kind::SET_LISTPACK,
            v_blob(&bad_total),
            true,
        ),
        case(
            "listpack total bytes too small",
            kind::HASH_LISTPACK,
            v_blob(&short_total),
            true,
        ),
        case(
            "listpack without its terminator",
            kind::ZSET_LISTPACK,
            v_blob(&no_terminator),
            true,
        ),
        case(
            "ziplist tail offset wrong",
            kind::LIST_ZIPLIST,
            v_blob(&bad_zl_tail),
            true,
        ),
        case(
            "ziplist count wrong",
            kind::HASH_ZIPLIST,
            v_blob(&bad_zl_count),
            true,
        ),
        case(
            "zipmap count wrong",
            kind::HASH_ZIPMAP,
            v_blob(&bad_zipmap_count),
            true,
        ),
        case(
            "quicklist2 container 3",
            kind::LIST_QUICKLIST_2,
            [len(1), len(3), raw(b"abc")].concat(),
            true,
        ),
        case(
            "listpack that is too short",
            kind::SET_LISTPACK,
            raw(&[7, 0, 0, 0, 0, 0]),
            true,
        ),
        case(
            "ziplist as a hash listpack",
            kind::HASH_LISTPACK,
            zl(&[s("a"), s("b")]),
            true,
        ),
        case(
            "listpack as a hash ziplist",
            kind::HASH_ZIPLIST,
            lp(&[s("a"), s("b")]),
            true,
        ),
        case(
            "listpack as an intset",
            kind::SET_INTSET,
            lp(&[It::I(1)]),
            true,
        ),
        // Broken strings.
        case("LZF data that does not decode", kind::STRING, bad_lzf, true),
        case("LZF length beyond the input", kind::STRING, lzf_long, true),
        case(
            "unknown string encoding",
            kind::STRING,
            vec![0xC4, 1, 2, 3],
            true,
        ),
        case(
            "invalid length prefix",
            kind::LIST,
            vec![0x82, 0, 0, 0, 1],
            true,
        ),
        case(
            "plain list count beyond the value",
            kind::LIST,
            [len(5), raw(b"a")].concat(),
            true,
        ),
        // Types no loader reads.
        case(
            "pre-release module type 6",
            kind::MODULE_PRE_GA,
            len(1),
            true,
        ),
        case("unknown type 30", 30, raw(b"x"), true),
        // Streams the stream reader rejects.
        case(
            "stream node key not 16 bytes",
            kind::STREAM_LISTPACKS_2,
            [len(1), raw(b"short"), v_blob(&listpack(&[It::I(1)]))].concat(),
            true,
        ),
    ]
}

#[test]
fn damaged_values_give_the_same_output_and_exit_code_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, c) in value_damage_cases().into_iter().enumerate() {
        // The case between good keys, in the middle of a database and at
        // its end; then alone.
        let mut f = Rdb::new(11);
        f.select(0)
            .key(kind::STRING, b"before", &raw(b"1"))
            .key(
                kind::SET_LISTPACK,
                b"before2",
                &v_blob(&listpack(&[It::I(3), s("x")])),
            )
            // Keys no loader hands on: the count of keys the fast path
            // handed over before the damage must leave them out.
            .key(kind::LIST, b"empty", &len(0))
            .key(kind::SET_LISTPACK, b"empty2", &v_blob(&listpack(&[])))
            .key(kind::MODULE_2, b"module", &v_module())
            .key(
                kind::HASH_METADATA,
                b"expired_fields",
                &v_hash24(&[(b"f", b"v", PAST_MS as u64)]),
            )
            .expire_ms(FUTURE_MS)
            .key(c.t, b"case", &c.value)
            .key(kind::STRING, b"after", &raw(b"2"))
            .select(3)
            .key(
                kind::HASH_LISTPACK,
                b"after2",
                &v_blob(&listpack(&[s("a"), s("b")])),
            );
        let path = write(dir.path(), &format!("case{i}.rdb"), &f.finish());
        let out = agree(&path, &[]).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let listed = text(&out.stdout);
        let want_code = i32::from(c.rejected);
        assert_eq!(
            out.code,
            want_code,
            "{}: {listed} {}",
            c.name,
            shorten(&out.stderr)
        );
        assert!(
            listed.contains("\"key\":\"before2\""),
            "{}: {listed}",
            c.name
        );
        if c.rejected {
            assert!(
                !listed.contains("\"key\":\"after\""),
                "{}: {listed}",
                c.name
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("damaged"), "{}: {err}", c.name);
        } else {
            assert!(
                listed.contains("\"key\":\"after2\""),
                "{}: {listed}",
                c.name
            );
        }
        for filters in [
            &["--db", "3"][..],
            &["--type", "string"],
            &["--match", "c*"],
            &["--skip-expired"],
        ] {
            agree(&path, filters).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        }
        let mut alone = Rdb::new(10);
        alone.key(c.t, b"case", &c.value);
        let path = write(dir.path(), &format!("alone{i}.rdb"), &alone.finish());
        agree(&path, &[]).unwrap_or_else(|e| panic!("{} alone: {e}", c.name));
    }
}

#[test]
fn wrong_zero_and_absent_checksums_and_record_damage_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut f = Rdb::new(10);
    f.select(0);
    for i in 0..50 {
        f.key(kind::STRING, format!("k{i}").as_bytes(), &raw(b"value"));
        f.key(
            kind::ZSET_LISTPACK,
            format!("z{i}").as_bytes(),
            &v_blob(&listpack(&[s("a"), It::I(i)])),
        );
    }
    let wrong = write(dir.path(), "wrong.rdb", &f.finish_with(Crc::Wrong));
    let out = assert_agree(&wrong, &[]);
    assert_eq!(out.code, 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checksum"),
        "{}",
        shorten(&out.stderr)
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        100,
        "every key, then the error"
    );
    for filters in FILTER_SETS {
        assert_agree(&wrong, filters);
    }
    let zero = write(dir.path(), "zero.rdb", &f.finish_with(Crc::Zero));
    let out = assert_agree(&zero, &[]);
    assert_eq!(out.code, 0, "{}", shorten(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 100);
    // Version 4 has no checksum.
    let mut old = Rdb::new(4);
    old.select(0).key(
        kind::LIST_ZIPLIST,
        b"l",
        &v_blob(&ziplist(&[s("a"), It::I(3)])),
    );
    old.key(
        kind::HASH_ZIPMAP,
        b"h",
        &v_blob(&zipmap(&[(b"f".to_vec(), b"v".to_vec())], 1)),
    );
    let v4 = write(dir.path(), "v4.rdb", &old.finish());
    assert_eq!(assert_agree(&v4, &[]).code, 0);
    // Cut anywhere, and the record-level damage the walk finds.
    let good = f.finish();
    for cut in [
        9,
        10,
        30,
        good.len() / 3,
        good.len() / 2,
        good.len() - 9,
        good.len() - 8,
        good.len() - 1,
    ] {
        let p = write(dir.path(), &format!("cut{cut}.rdb"), &good[..cut]);
        let out = assert_agree(&p, &[]);
        assert_eq!(out.code, 1, "cut at {cut}");
    }
    let mut records = Rdb::new(10);
    records.select(0).key(kind::STRING, b"a", &raw(b"1"));
    let mut unknown_opcode = records.buf.clone();
    unknown_opcode.push(opcode::FUNCTION_PRE_GA);
    unknown_opcode.extend(raw(b"x"));
    let mut bad_key = records.buf.clone();
    bad_key.extend([kind::STRING, 0xC3, 2, 40, 0xFF, 0xFF]);
    let mut bad_module = records.buf.clone();
    bad_module.push(kind::MODULE_2);
    bad_module.extend(raw(b"m"));
    bad_module.extend(len(99));
    bad_module.extend(len(9));
    for (name, mut body) in [
        ("function_pre_ga", unknown_opcode),
        ("bad_key", bad_key),
        ("bad_module", bad_module),
    ] {
        body.extend([kind::STRING]);
        body.extend(raw(b"after"));
        body.extend(raw(b"2"));
        body.push(opcode::EOF);
        let sum = crc64(&body);
        body.extend_from_slice(&sum.to_le_bytes());
        let p = write(dir.path(), &format!("{name}.rdb"), &body);
        let out = assert_agree(&p, &[]);
        assert_eq!(out.code, 1, "{name}");
        assert_eq!(text(&out.stdout).lines().count(), 1, "{name}");
    }
}

#[test]
fn negative_zero_scores_print_as_the_loaded_encoding_holds_them() {
    // A sorted set loaded as a listpack holds no -0 (Redis stores the
    // integer 0): 128 entries or fewer, and for the plain types members of
    // at most 64 bytes (a loaded ziplist or listpack converts by its entry
    // count only). A skiplist keeps -0.
    let dir = tempfile::tempdir().expect("tempdir");
    let long = vec![b'l'; 65];
    let just = vec![b'j'; 64];
    for t in [
        kind::ZSET,
        kind::ZSET_2,
        kind::ZSET_ZIPLIST,
        kind::ZSET_LISTPACK,
    ] {
        let mut f = Rdb::new(10);
        let mut cases: Vec<(Vec<u8>, Vec<Vec<u8>>, bool)> = Vec::new();
        for (n, negative) in [(128, false), (129, true), (2, false)] {
            let members = (1..n).map(|i| format!("m{i}").into_bytes()).collect();
            cases.push((format!("n{n}").into_bytes(), members, negative));
        }
        let compact = matches!(t, kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK);
        cases.push((b"long".to_vec(), vec![long.clone()], !compact));
        cases.push((b"just".to_vec(), vec![just.clone()], false));
        for (key, members, _) in &cases {
            let mut pairs: Vec<(&[u8], f64)> = vec![(b"zero", -0.0)];
            pairs.extend(members.iter().map(|m| (&m[..], 1.0)));
            let value = match t {
                kind::ZSET => v_zset3(&pairs),
                kind::ZSET_2 => v_zset5(&pairs),
                kind::ZSET_ZIPLIST => v_blob(&ziplist(&scored_items(&pairs, true))),
                _ => v_blob(&listpack(&scored_items(&pairs, true))),
            };
            f.key(t, key, &value);
        }
        let path = write(dir.path(), &format!("negzero{t}.rdb"), &f.finish());
        let out = assert_agree(&path, &[]);
        assert_eq!(out.code, 0, "type {t}: {}", shorten(&out.stderr));
        let listed = text(&out.stdout);
        for (key, _, negative) in &cases {
            let key = std::str::from_utf8(key).expect("ASCII");
            let line = listed
                .lines()
                .find(|l| l.contains(&format!("\"key\":\"{key}\"")))
                .unwrap_or_else(|| panic!("type {t}: no key {key}: {listed}"));
            let want = if *negative {
                r#"["zero",-0]"#
            } else {
                r#"["zero",0]"#
            };
            assert!(line.contains(want), "type {t}, key {key}: {line}");
        }
    }
}
