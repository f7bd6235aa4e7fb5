use super::*;

// -- Round trips --------------------------------------------------------

#[test]
fn random_keyspaces_round_trip_through_real_files() {
    fn prop(seed: u64) -> TestResult {
        let ks = random_keyspace(seed, 60);
        let expected = dump(&ks, NOW_MS);
        let past_ttl = (dump(&ks, i64::MIN).len() - expected.len()) as u64;
        let dir = tempfile::tempdir().expect("tempdir");
        let summary =
            save_keyspace(&ks, NOW_MS, Arc::new(RealIo), dir.path(), "dump.hoz").expect("save");
        let data = RealIo.map(&dir.path().join("dump.hoz")).expect("map");
        assert_eq!(read_summary(&data).expect("summary"), summary);
        let loaded = load(&data, &read(2, EncodingLimits::default(), NOW_MS)).expect("load");
        let context = format!("seed {seed}");
        let l = EncodingLimits::default();
        assert_loads_as(&expected, &dump_loaded(&loaded), &l, &context);
        let mut ks2 = Keyspace::new(16);
        let (s2, expired) = load_into(&data, &mut ks2, &read(1, EncodingLimits::default(), NOW_MS))
            .expect("load_into");
        assert_eq!((s2, expired), (summary, past_ttl));
        assert_loads_as(&expected, &dump(&ks2, NOW_MS), &l, &context);
        let names = RealIo.list_dir(dir.path()).expect("list");
        assert_eq!(names, vec!["dump.hoz".to_string()], "no temp file left");
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(40)
        .quickcheck(prop as fn(u64) -> TestResult);
}

#[test]
fn tiny_blocks_split_every_kind_of_value() {
    fn prop(seed: u64) -> TestResult {
        round_trip_seed(seed, 30, 200)
    }
    QuickCheck::new()
        .tests(40)
        .quickcheck(prop as fn(u64) -> TestResult);
}

fn later_id(id: StreamId) -> StreamId {
    StreamId::new(id.ms + 1, id.seq)
}

/// Every kind of damage that applies to `got`, the correct loaded form
/// of `saved`, named.
fn mutations(saved: &DumpValue, got: &DumpValue) -> Vec<(&'static str, DumpValue)> {
    let (value, enc, ttl) = got.clone();
    let mut out: Vec<(&'static str, DumpValue)> = Vec::new();
    let later = Some(ttl.map_or(NOW_MS + 1000, |t| t + 1));
    out.push(("expiry", (value.clone(), enc, later)));
    if ttl.is_some() {
        out.push(("expiry dropped", (value.clone(), enc, None)));
    }
    let mut value_change = |what, v: Canon| out.push((what, (v, enc, ttl)));
    match value.clone() {
        Canon::Str(mut s) => {
            s.push(b'x');
            value_change("string changed", Canon::Str(s));
        }
        Canon::List(v) => {
            let mut dropped = v.clone();
            dropped.pop();
            value_change("list element dropped", Canon::List(dropped));
            if let Some(i) = v.iter().position(|e| *e != v[0]) {
                let mut swapped = v.clone();
                swapped.swap(0, i);
                value_change("list order", Canon::List(swapped));
            }
        }
        Canon::Hash(e, p) => {
            let other = if e == "listpack" {
                "hashtable"
            } else {
                "listpack"
            };
            out.push(("encoding", (Canon::Hash(other, p.clone()), other, ttl)));
            let mut v = p.clone();
            v.pop();
            out.push(("hash field dropped", (Canon::Hash(e, v), enc, ttl)));
            let mut v = p.clone();
            v[0].1.push(b'x');
            out.push(("hash value changed", (Canon::Hash(e, v), enc, ttl)));
            let mut v = p.clone();
            v[0].0.push(0xff);
            out.push(("hash field renamed", (Canon::Hash(e, v), enc, ttl)));
            let kept_order = matches!(&saved.0, Canon::Hash("listpack", _)) && e == "listpack";
            if kept_order && p.len() >= 2 {
                let mut v = p.clone();
                v.swap(0, 1);
                out.push(("listpack hash order", (Canon::Hash(e, v), enc, ttl)));
            }
        }
        Canon::Set(e, m) => {
            let other = if e == "intset" { "hashtable" } else { "intset" };
            out.push(("encoding", (Canon::Set(other, m.clone()), other, ttl)));
            let mut v = m.clone();
            v.pop();
            out.push(("set member dropped", (Canon::Set(e, v), enc, ttl)));
            let mut v = m.clone();
            v[0].push(b'x');
            out.push(("set member changed", (Canon::Set(e, v), enc, ttl)));
        }
        Canon::ZSet(e, z) => {
            let other = if e == "listpack" {
                "skiplist"
            } else {
                "listpack"
            };
            out.push(("encoding", (Canon::ZSet(other, z.clone()), other, ttl)));
            let mut v = z.clone();
            v.pop();
            out.push(("zset member dropped", (Canon::ZSet(e, v), enc, ttl)));
            let mut v = z.clone();
            let score = f64::from_bits(v[0].1);
            let changed = if score.is_finite() { score + 1.0 } else { 0.5 };
            v[0].1 = changed.to_bits();
            out.push(("zset score changed", (Canon::ZSet(e, v), enc, ttl)));
            if z.len() >= 2 {
                let mut v = z.clone();
                v.swap(0, 1);
                out.push(("zset order", (Canon::ZSet(e, v), enc, ttl)));
            }
            if let Some(i) = z.iter().position(|(_, s)| f64::from_bits(*s) == 0.0) {
                let mut v = z.clone();
                v[i].1 ^= 1 << 63;
                out.push(("zset zero sign", (Canon::ZSet(e, v), enc, ttl)));
            }
        }
        Canon::Stream(s) => {
            let mut stream_change = |what, f: &dyn Fn(&mut CanonStream)| {
                let mut t = s.clone();
                f(&mut t);
                out.push((what, (Canon::Stream(t), enc, ttl)));
            };
            stream_change("stream last id", &|t| t.last_id = later_id(t.last_id));
            stream_change("stream first id", &|t| t.first_id = later_id(t.first_id));
            stream_change("stream max deleted", &|t| {
                t.max_deleted = later_id(t.max_deleted)
            });
            stream_change("stream entries added", &|t| t.entries_added += 1);
            if !s.entries.is_empty() {
                stream_change("stream entry dropped", &|t| {
                    t.entries.pop();
                });
                stream_change("stream value changed", &|t| t.entries[0].1[0].1.push(b'x'));
            }
            if !s.groups.is_empty() {
                stream_change("group renamed", &|t| t.groups[0].0.push(b'x'));
                stream_change("group last id", &|t| {
                    t.groups[0].1 = later_id(t.groups[0].1)
                });
                stream_change("group entries read", &|t| t.groups[0].2 += 1);
            }
            if let Some(g) = s.groups.iter().position(|g| !g.3.is_empty()) {
                stream_change("pel entry dropped", &|t| {
                    t.groups[g].3.pop();
                });
                stream_change("pel delivery time", &|t| t.groups[g].3[0].1 += 1);
                stream_change("pel delivery count", &|t| t.groups[g].3[0].2 += 1);
                stream_change("pel consumer", &|t| t.groups[g].3[0].3.push(b'x'));
            }
            if let Some(g) = s.groups.iter().position(|g| !g.4.is_empty()) {
                stream_change("consumer seen time", &|t| t.groups[g].4[0].1 += 1);
                stream_change("consumer dropped", &|t| {
                    t.groups[g].4.pop();
                });
            }
            if let Some(g) = s
                .groups
                .iter()
                .position(|g| g.4.iter().any(|c| !c.2.is_empty()))
            {
                stream_change("consumer pel dropped", &|t| {
                    let c = t.groups[g].4.iter_mut().find(|c| !c.2.is_empty());
                    c.expect("found above").2.pop();
                });
            }
        }
    }
    out
}

/// The round-trip comparison is only as good as what it rejects: every
/// kind of damage to a correctly loaded keyspace fails it, while the
/// freedom the loader has (a hash table's order, the compact rebuild
/// of a collection that shrank, `-0` stored as `0` by a listpack) does
/// not.
#[test]
fn load_comparison_rejects_every_kind_of_difference() {
    let l = limits();
    let mut ks = random_keyspace(5, 300);
    // Collections that were converted and shrank: they load compact.
    let mut h = Hash::new();
    for i in 0..600 {
        h.set(format!("f{i}").as_bytes(), Blob::from("v"), &l);
    }
    for i in 5..600 {
        h.remove(format!("f{i}").as_bytes());
    }
    ks.db_mut(0)
        .insert_new(b"shrunk-hash", Value::Hash(Box::new(h)));
    let mut s = Set::for_member(b"x");
    for m in ["x", "3", "1", "2"] {
        s.insert(m.as_bytes(), 512);
    }
    s.remove(b"x");
    ks.db_mut(0)
        .insert_new(b"shrunk-set", Value::Set(Box::new(s)));
    let mut z = ZSet::for_first_member(100, &l);
    for (m, score) in [
        (&[b'x'; 100][..], 1.0),
        (b"a", -0.0),
        (b"b", 0.0),
        (b"c", -0.0),
    ] {
        z.add(m, score, AddFlags::default(), &l).expect("not NaN");
    }
    z.remove(&[b'x'; 100]);
    ks.db_mut(0)
        .insert_new(b"shrunk-zset", Value::ZSet(Box::new(z)));

    let saved = dump(&ks, NOW_MS);
    let (_, data, _) = save_mem(&ks, BLOCK_TARGET_BYTES);
    let got = dump_loaded(&load(&data, &read(2, l, NOW_MS)).expect("load"));
    assert_loads_as(&saved, &got, &l, "intact");
    let shrunk = |k: &[u8]| &got[&(0, k.to_vec())];
    assert_eq!(shrunk(b"shrunk-hash").1, "listpack");
    assert_eq!(shrunk(b"shrunk-set").1, "intset");
    assert_eq!(shrunk(b"shrunk-zset").1, "listpack");

    let mut seen = std::collections::BTreeSet::new();
    for (k, g) in &got {
        let s = &saved[k];
        for (what, bad) in mutations(s, g) {
            assert!(
                check_value(s, &bad, &l).is_err(),
                "{what} of {k:?} accepted:\n{g:?}\n{bad:?}"
            );
            seen.insert(what);
        }
        // A hash table's order is free after a compact rebuild.
        if let (Canon::Hash("hashtable", _), Canon::Hash("listpack", p)) = (&s.0, &g.0) {
            let mut reversed = p.clone();
            reversed.reverse();
            let other = (Canon::Hash("listpack", reversed), g.1, g.2);
            assert_eq!(check_value(s, &other, &l), Ok(()));
            seen.insert("free order of a rebuilt hash");
        }
    }
    let mut fewer = got.clone();
    fewer.pop_first();
    assert!(compare_loaded(&saved, &fewer, &l).is_err(), "lost key");
    let mut more = got.clone();
    more.insert(
        (15, b"extra".to_vec()),
        (Canon::Str(vec![]), "embstr", None),
    );
    assert!(compare_loaded(&saved, &more, &l).is_err(), "extra key");
    let all = [
        "expiry",
        "expiry dropped",
        "string changed",
        "list element dropped",
        "list order",
        "encoding",
        "hash field dropped",
        "hash value changed",
        "hash field renamed",
        "listpack hash order",
        "free order of a rebuilt hash",
        "set member dropped",
        "set member changed",
        "zset member dropped",
        "zset score changed",
        "zset order",
        "zset zero sign",
        "stream last id",
        "stream first id",
        "stream max deleted",
        "stream entries added",
        "stream entry dropped",
        "stream value changed",
        "group renamed",
        "group last id",
        "group entries read",
        "pel entry dropped",
        "pel delivery time",
        "pel delivery count",
        "pel consumer",
        "consumer seen time",
        "consumer dropped",
        "consumer pel dropped",
    ];
    assert_eq!(seen, all.into_iter().collect());
}

#[test]
fn large_values_split_across_default_blocks() {
    let l = limits();
    let mut ks = Keyspace::new(16);
    let big: Vec<u8> = (0..3_500_000u32).map(|i| (i % 251) as u8).collect();
    ks.db_mut(0)
        .insert_new(b"big-string", Value::Str(Blob::from(big)));
    ks.db_mut(0).set_expire(b"big-string", NOW_MS + 5);
    let list: List = (0..300_000u32).map(|i| format!("item-{i}")).collect();
    ks.db_mut(1)
        .insert_new(b"big-list", Value::List(Box::new(list)));
    let mut h = Hash::new();
    for i in 0..100_000u32 {
        h.set(
            format!("field-{i}").as_bytes(),
            Blob::from_i64(i64::from(i)),
            &l,
        );
    }
    ks.db_mut(2)
        .insert_new(b"big-hash", Value::Hash(Box::new(h)));
    let mut s = Stream::new();
    let mut g = ConsumerGroup::default();
    g.consumers.insert(Blob::from("alice"), Consumer::default());
    for i in 1..=60_000u64 {
        s.append(
            StreamId::new(i, 0),
            vec![(Blob::from("f"), Blob::from_i64(i as i64))].into_boxed_slice(),
        );
        g.pel.insert(
            StreamId::new(i, 0),
            PendingEntry {
                delivery_time_ms: i as i64,
                delivery_count: 1,
                consumer: Blob::from("alice"),
            },
        );
        g.consumers
            .get_mut(b"alice".as_slice())
            .expect("inserted")
            .pel
            .insert(StreamId::new(i, 0));
    }
    s.groups.insert(Blob::from("g"), g);
    ks.db_mut(3)
        .insert_new(b"big-stream", Value::Stream(Box::new(s)));
    ks.db_mut(3)
        .insert_new(b"small", Value::Str(Blob::from("x")));
    let expected = dump(&ks, NOW_MS);
    let (_, data, summary) = save_mem(&ks, BLOCK_TARGET_BYTES);
    assert_eq!(summary.stats.split_values, 4);
    assert!(summary.blocks.len() > 8);
    for b in &summary.blocks {
        assert!(
            b.raw_len < (BLOCK_TARGET_BYTES + MIN_STRING_CHUNK + 64) as u64,
            "{b:?}"
        );
    }
    for workers in [0, 4] {
        let loaded = load(&data, &read(workers, l, NOW_MS)).expect("load");
        assert_loads_as(&expected, &dump_loaded(&loaded), &l, "default blocks");
    }
}

#[test]
fn encodings_follow_the_loading_limits_like_redis() {
    let l = limits();
    let mut ks = Keyspace::new(1);
    // A hash that grew past the listpack limit and shrank again is a
    // hash table in memory; Redis loads it as a listpack again.
    let mut h = Hash::new();
    for i in 0..600 {
        h.set(format!("f{i}").as_bytes(), Blob::from("v"), &l);
    }
    for i in 3..600 {
        h.remove(format!("f{i}").as_bytes());
    }
    assert_eq!(h.encoding(), "hashtable");
    ks.db_mut(0).insert_new(b"h", Value::Hash(Box::new(h)));
    let mut s = Set::for_member(b"x");
    for m in ["x", "1", "2"] {
        s.insert(m.as_bytes(), 512);
    }
    s.remove(b"x");
    ks.db_mut(0).insert_new(b"s", Value::Set(Box::new(s)));
    let (_, data, _) = save_mem(&ks, BLOCK_TARGET_BYTES);
    let loaded = load(&data, &read(0, l, NOW_MS)).expect("load");
    let got = dump_loaded(&loaded);
    assert_eq!(got[&(0, b"h".to_vec())].1, "listpack");
    assert_eq!(got[&(0, b"s".to_vec())].1, "intset");
    // Smaller limits at load time convert.
    let small = EncodingLimits {
        hash_max_listpack_entries: 2,
        set_max_intset_entries: 1,
        ..l
    };
    let got = dump_loaded(&load(&data, &read(0, small, NOW_MS)).expect("load"));
    assert_eq!(got[&(0, b"h".to_vec())].1, "hashtable");
    assert_eq!(got[&(0, b"s".to_vec())].1, "hashtable");
}

#[test]
fn parallel_decoding_matches_one_thread() {
    let ks = random_keyspace(7, 400);
    let (_, data, _) = save_mem(&ks, 2048);
    let one = dump_loaded(&load(&data, &read(0, limits(), NOW_MS)).expect("load"));
    for workers in [1, 2, 3, 8] {
        let loaded = load(&data, &read(workers, limits(), NOW_MS)).expect("load");
        assert_eq!(dump_loaded(&loaded), one);
        // Same order of blocks and keys, not just the same set.
        let order: Vec<_> = loaded.keys().map(|k| (k.db, k.key.to_vec())).collect();
        let order1: Vec<_> = load(&data, &read(0, limits(), NOW_MS))
            .expect("load")
            .keys()
            .map(|k| (k.db, k.key.to_vec()))
            .collect();
        assert_eq!(order, order1);
    }
    assert_loads_as(&dump(&ks, NOW_MS), &one, &limits(), "one thread");
}

#[test]
fn keys_past_their_ttl_are_saved_and_skipped_at_load() {
    let mut ks = Keyspace::new(2);
    for (i, at) in [None, Some(NOW_MS - 1), Some(NOW_MS), Some(NOW_MS + 10)]
        .into_iter()
        .enumerate()
    {
        let key = format!("k{i}");
        ks.db_mut(1)
            .insert_new(key.as_bytes(), Value::Str(Blob::from("v")));
        if let Some(at) = at {
            ks.db_mut(1).set_expire(key.as_bytes(), at);
        }
    }
    // Redis 7.0 saves a key past its TTL that is not yet deleted; the
    // load drops it.
    let (_, data, summary) = save_mem(&ks, BLOCK_TARGET_BYTES);
    assert_eq!(summary.stats.keys, 4);
    assert_eq!(summary.stats.expiring_keys, 3);
    assert_eq!(summary.stats.min_expire_ms, Some(NOW_MS - 1));
    assert_eq!(summary.stats.max_expire_ms, Some(NOW_MS + 10));
    assert_eq!(
        summary.stats.dbs[&1],
        DbStats {
            keys: 4,
            expiring_keys: 3
        }
    );
    let now = load(&data, &read(0, limits(), NOW_MS)).expect("load");
    assert_eq!((now.len(), now.expired_skipped), (3, 1));
    let later = load(&data, &read(0, limits(), NOW_MS + 5)).expect("load");
    assert_eq!((later.len(), later.expired_skipped), (2, 2));
    let mut small = Keyspace::new(1);
    let err = load_into(&data, &mut small, &read(0, limits(), NOW_MS)).unwrap_err();
    assert!(
        matches!(
            err,
            SnapshotError::DbOutOfRange {
                db: 1,
                databases: 1
            }
        ),
        "{err}"
    );
}

#[test]
fn summary_counts_types_and_largest_values() {
    let ks = random_keyspace(11, 200);
    let (_, data, summary) = save_mem(&ks, 4096);
    let read = read_summary(&data).expect("summary");
    assert_eq!(read, summary);
    let expected = dump(&ks, i64::MIN);
    let mut per_type = [0u64; 6];
    for (canon, _, _) in expected.values() {
        let t = match canon {
            Canon::Str(_) => ValueType::String,
            Canon::List(_) => ValueType::List,
            Canon::Hash(..) => ValueType::Hash,
            Canon::Set(..) => ValueType::Set,
            Canon::ZSet(..) => ValueType::ZSet,
            Canon::Stream(_) => ValueType::Stream,
        };
        per_type[t as usize] += 1;
    }
    for t in ValueType::ALL {
        assert_eq!(read.stats.of(t).keys, per_type[t as usize], "{}", t.name());
    }
    assert_eq!(read.stats.keys, expected.len() as u64);
    let raw: u64 = read.stats.types.iter().map(|t| t.bytes).sum();
    assert_eq!(raw, read.raw_bytes);
    assert_eq!(read.file_len, data.len() as u64);
    assert_eq!(read.engine_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(read.created_ms, NOW_MS);
}

#[test]
fn empty_keyspace_round_trips() {
    let ks = Keyspace::new(16);
    let (_, data, summary) = save_mem(&ks, BLOCK_TARGET_BYTES);
    assert!(summary.blocks.is_empty());
    let loaded = load(&data, &read(4, limits(), NOW_MS)).expect("load");
    assert!(loaded.is_empty());
}
