use super::*;

// -- Damage -------------------------------------------------------------

/// A small snapshot with many blocks, some values split across
/// several of them.
fn damaged_fixture() -> (Keyspace, Vec<u8>, Summary) {
    let l = limits();
    let mut ks = Keyspace::new(4);
    let mut rng = Rng::with_seed(3);
    for i in 0..40 {
        let key = format!("key:{i}");
        let value = if i % 13 == 5 {
            random_value(&mut rng, &l)
        } else {
            Value::Str(Blob::from(bytes(&mut rng, 40)))
        };
        ks.db_mut(i % 3).insert_new(key.as_bytes(), value);
    }
    let big: Vec<u8> = (0..1500u32).map(|i| (i * 7) as u8).collect();
    ks.db_mut(1).insert_new(b"big", Value::Str(Blob::from(big)));
    ks.db_mut(1).set_expire(b"big", NOW_MS + 1);
    let list: List = (0..120u32).map(|i| format!("element-{i}")).collect();
    ks.db_mut(2)
        .insert_new(b"list", Value::List(Box::new(list)));
    let mut z = ZSet::new();
    for i in 0..150 {
        z.add(
            format!("m{i}").as_bytes(),
            f64::from(i) / 3.0,
            AddFlags::default(),
            &l,
        )
        .expect("score");
    }
    ks.db_mut(0).insert_new(b"zset", Value::ZSet(Box::new(z)));
    let (_, data, summary) = save_mem(&ks, 400);
    assert!(
        summary.blocks.len() >= 12,
        "{} blocks",
        summary.blocks.len()
    );
    assert!(summary.stats.split_values >= 3, "{:?}", summary.stats);
    (ks, data, summary)
}

/// For each key, the first and last block holding a record of it.
fn key_spans(data: &[u8], summary: &Summary) -> BTreeMap<(usize, Vec<u8>), (usize, usize)> {
    let mut spans = BTreeMap::new();
    let mut scratch = Vec::new();
    for (i, b) in summary.blocks.iter().enumerate() {
        let region = Region {
            file_id: None,
            end: summary.footer_offset,
        };
        let block = decode_block(
            data,
            b.offset,
            None,
            region,
            &read(0, limits(), NOW_MS),
            &mut scratch,
        )
        .expect("intact");
        for item in block.items {
            match item {
                Item::Whole(k) => {
                    spans.insert((k.db, k.key.to_vec()), (i, i));
                }
                Item::Part(p) => {
                    spans.entry((p.db, p.key.to_vec())).or_insert((i, i)).1 = i;
                }
                Item::Expired => {}
            }
        }
    }
    spans
}

/// Keys none of whose records lie in `damaged` blocks.
fn survivors(
    data: &[u8],
    summary: &Summary,
    damaged: impl Fn(usize) -> bool,
) -> Vec<(usize, Vec<u8>)> {
    key_spans(data, summary)
        .into_iter()
        .filter(|(_, (a, b))| !(*a..=*b).any(&damaged))
        .map(|(k, _)| k)
        .collect()
}

/// Whatever salvage returns must be exactly what was saved.
fn check_salvage_is_faithful(data: &[u8], expected: &Dump) -> (Dump, Vec<Damage>) {
    let (loaded, damages) = load_salvaging(data, &read(2, limits(), NOW_MS));
    let got = dump_loaded(&loaded);
    for (k, v) in &got {
        let Some(saved) = expected.get(k) else {
            panic!("salvage produced a key that was not saved: {k:?}");
        };
        if let Err(e) = check_value(saved, v, &limits()) {
            panic!("salvage produced a wrong value for {k:?}: {e}");
        }
    }
    (got, damages)
}

#[test]
fn truncation_anywhere_is_an_error_and_salvage_keeps_complete_blocks() {
    let (ks, data, summary) = damaged_fixture();
    let expected = dump(&ks, NOW_MS);
    for cut in 0..data.len() {
        let part = &data[..cut];
        let err = load(part, &read(2, limits(), NOW_MS)).expect_err("truncated file loads");
        assert!(err.is_damage(), "cut {cut}: {err}");
        assert!(
            matches!(
                err,
                SnapshotError::Truncated { .. } | SnapshotError::NotASnapshot(_)
            ),
            "cut {cut}: {err}"
        );
        let (got, damages) = check_salvage_is_faithful(part, &expected);
        assert!(!damages.is_empty(), "cut {cut}: damage not reported");
        // Every key all of whose records lie in blocks before the cut
        // is recovered.
        let whole = |i: usize| summary.blocks[i].end() > cut as u64;
        for k in survivors(&data, &summary, whole) {
            assert!(
                got.contains_key(&k),
                "cut {cut}: {k:?} of a complete block lost"
            );
        }
    }
}

#[test]
fn bit_flips_are_detected_in_every_region() {
    let (ks, data, summary) = damaged_fixture();
    let expected = dump(&ks, NOW_MS);
    let header_len = summary.blocks[0].offset as usize;
    let trailer_at = data.len() - TRAILER_LEN;
    let mut rng = Rng::with_seed(5);
    // Every byte outside block payloads, and a sample of payload bytes.
    let positions: Vec<usize> = (0..data.len())
        .filter(|&pos| {
            let in_payload = summary.blocks.iter().any(|b| {
                (pos as u64) >= b.offset + BLOCK_HEADER_LEN as u64 && (pos as u64) < b.end()
            });
            !in_payload || rng.below(8) == 0
        })
        .collect();
    for pos in positions {
        let mut bad = data.clone();
        bad[pos] ^= 1 << rng.below(8);
        let err = match load(&bad, &read(2, limits(), NOW_MS)) {
            Ok(_) => panic!("flip at {pos} not detected"),
            Err(e) => e,
        };
        let block_at = summary.blocks.iter().position(|b| (pos as u64) < b.end());
        let region_ok = if pos < header_len {
            matches!(
                err,
                SnapshotError::Header { .. } | SnapshotError::NotASnapshot(_)
            )
        } else if pos < summary.footer_offset as usize {
            let block = block_at.expect("inside a block");
            matches!(&err, SnapshotError::Block { index, keys, .. }
                    if *index as usize == block
                        && *keys == u64::from(summary.blocks[block].records))
        } else if pos < trailer_at {
            matches!(err, SnapshotError::Footer { .. })
        } else {
            matches!(
                err,
                SnapshotError::Trailer { .. } | SnapshotError::Truncated { .. }
            )
        };
        assert!(region_ok, "flip at {pos}: {err}");
        let text = err.to_string();
        assert!(text.contains("hozon-repair"), "{text}");
        let (got, damages) = check_salvage_is_faithful(&bad, &expected);
        assert!(!damages.is_empty(), "flip at {pos}: no damage reported");
        if pos < header_len || pos >= summary.footer_offset as usize {
            assert_eq!(got, expected, "flip at {pos} outside the blocks lost keys");
        } else {
            let block = block_at.expect("inside a block");
            for k in survivors(&data, &summary, |i| i == block) {
                assert!(
                    got.contains_key(&k),
                    "flip at {pos} in block {block} lost {k:?}"
                );
            }
            let lost: u64 = damages.iter().filter_map(|d| d.keys_lost).sum();
            assert!(
                lost >= u64::from(summary.blocks[block].records),
                "flip at {pos}"
            );
        }
    }
}

#[test]
fn salvage_reports_the_damaged_block_and_keeps_the_others() {
    let (ks, data, summary) = damaged_fixture();
    let expected = dump(&ks, NOW_MS);
    for victim in 0..summary.blocks.len() {
        let b = summary.blocks[victim];
        let mut bad = data.clone();
        bad[(b.offset + BLOCK_HEADER_LEN as u64 + b.stored_len / 2) as usize] ^= 0x40;
        let err = load(&bad, &read(0, limits(), NOW_MS)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("block {victim} at offset {}", b.offset))
                && text.contains(&format!("holding {} keys", b.records))
                && text.contains("payload checksum"),
            "{text}"
        );
        let (got, damages) = check_salvage_is_faithful(&bad, &expected);
        let d = damages
            .iter()
            .find(|d| d.block == Some(victim as u32) && d.keys_lost == Some(u64::from(b.records)))
            .expect("damage for the victim block");
        assert_eq!(d.offset, b.offset);
        let keep = survivors(&data, &summary, |i| i == victim);
        for k in &keep {
            assert!(got.contains_key(k), "block {victim} damaged: lost {k:?}");
        }
        assert_eq!(
            got.len(),
            keep.len(),
            "block {victim}: kept a key it should not have"
        );
    }
}

#[test]
fn salvage_streaming_delivers_what_load_salvaging_returns() {
    let (_, data, summary) = damaged_fixture();
    let mut bad = data.clone();
    let b = summary.blocks[1];
    bad[(b.offset + BLOCK_HEADER_LEN as u64 + b.stored_len / 2) as usize] ^= 0x40;
    let (loaded, damages) = load_salvaging(&bad, &read(2, limits(), NOW_MS));
    let mut streamed = Loaded::default();
    let salvaged = salvage_streaming(&bad, &read(0, limits(), NOW_MS), |keys| {
        streamed.blocks.push(keys);
    });
    assert_eq!(dump_loaded(&streamed), dump_loaded(&loaded));
    assert_eq!(salvaged.expired_skipped, loaded.expired_skipped);
    assert!(salvaged.summary.is_some());
    let offsets = |d: &[Damage]| {
        d.iter()
            .map(|d| (d.offset, d.keys_lost))
            .collect::<Vec<_>>()
    };
    assert_eq!(offsets(&salvaged.damages), offsets(&damages));
}

#[test]
fn readable_keys_lists_a_damaged_blocks_keys() {
    let (_, data, summary) = damaged_fixture();
    let spans = key_spans(&data, &summary);
    for (i, b) in summary.blocks.iter().enumerate() {
        let mut want: Vec<(usize, Vec<u8>)> = spans
            .iter()
            .filter(|(_, (first, last))| (*first..=*last).contains(&i))
            .map(|(k, _)| k.clone())
            .collect();
        want.sort();
        let keys_of = |d: &[u8]| {
            let mut got: Vec<(usize, Vec<u8>)> = readable_keys(d, b.offset)
                .into_iter()
                .map(|(db, k)| (db, k.to_vec()))
                .collect();
            got.sort();
            got
        };
        assert_eq!(keys_of(&data), want, "block {i}");
        // A flipped header CRC and a flipped CRC field change nothing
        // readable.
        let mut bad = data.clone();
        bad[b.offset as usize + 33] ^= 0x10;
        assert_eq!(keys_of(&bad), want, "block {i}");
    }
    assert!(readable_keys(&data, 3).is_empty());
    assert!(readable_keys(&data, data.len() as u64 + 10).is_empty());
}

#[test]
fn salvage_without_footer_walks_the_blocks() {
    let (ks, data, summary) = damaged_fixture();
    let expected = dump(&ks, NOW_MS);
    let mut bad = data.clone();
    bad[summary.footer_offset as usize + 5] ^= 1;
    let (got, damages) = check_salvage_is_faithful(&bad, &expected);
    assert_eq!(got, expected);
    assert_eq!(damages.len(), 1);
    // A damaged block header too: the scan resynchronises on the next.
    let b = summary.blocks[1];
    bad[b.offset as usize + 17] ^= 1;
    let (got, damages) = check_salvage_is_faithful(&bad, &expected);
    assert!(damages.iter().any(|d| d.offset == b.offset), "{damages:?}");
    for k in survivors(&data, &summary, |i| i == 1) {
        assert!(got.contains_key(&k), "lost {k:?}");
    }
}

#[test]
fn salvage_never_takes_blocks_of_a_snapshot_stored_in_a_value() {
    let build = || {
        let mut rng = Rng::with_seed(17);
        let mut inner = Keyspace::new(1);
        for i in 0..8 {
            let v: Vec<u8> = (0..200).map(|_| rng.next_u64() as u8).collect();
            inner
                .db_mut(0)
                .insert_new(format!("inner:{i}").as_bytes(), Value::Str(Blob::from(v)));
        }
        let (_, image, _) = save_mem(&inner, 300);
        let mut outer = Keyspace::new(1);
        outer
            .db_mut(0)
            .insert_new(b"blob", Value::Str(Blob::from(image)));
        for i in 0..30 {
            let v: Vec<u8> = (0..100).map(|_| rng.next_u64() as u8).collect();
            outer
                .db_mut(0)
                .insert_new(format!("outer:{i}").as_bytes(), Value::Str(Blob::from(v)));
        }
        outer
    };
    // The inner blocks' headers repeat the magic and the inner file's
    // random ID, so LZ4 sometimes encodes them as back-references in
    // the outer blocks (it depends on that ID) and the magic is not in
    // the file. The case under test needs the images there byte for
    // byte: build again (a new inner file ID) until they are.
    let (outer, data, summary) = (0..100)
        .find_map(|_| {
            let outer = build();
            let (_, data, summary) = save_mem(&outer, 1500);
            let images = data.windows(4).filter(|w| *w == BLOCK_MAGIC).count();
            (images > summary.blocks.len() + 2).then_some((outer, data, summary))
        })
        .expect("inner block images are in the file");
    let expected = dump(&outer, NOW_MS);
    let spans = key_spans(&data, &summary);
    let (first, _) = spans[&(0, b"blob".to_vec())];
    let mut bad = data.clone();
    bad[summary.footer_offset as usize + 1] ^= 1;
    bad[summary.blocks[first].offset as usize + 20] ^= 1;
    let (got, damages) = check_salvage_is_faithful(&bad, &expected);
    assert!(got.keys().all(|(_, k)| !k.starts_with(b"inner:")));
    assert!(damages
        .iter()
        .any(|d| d.offset == summary.blocks[first].offset));
    for k in survivors(&data, &summary, |i| i == first) {
        assert!(got.contains_key(&k), "lost {k:?}");
    }
}

#[test]
fn streams_of_1_0_files_rebuild_their_nodes_and_1_1_nodes_are_checked() {
    let entry = |ms| {
        let fields: Fields = vec![(Blob::from(&b"f"[..]), Blob::from(&b"v"[..]))].into();
        StreamElem::Entry(StreamId::new(ms, 0), fields)
    };
    let counters = || StreamElem::Counters {
        last_id: StreamId::new(3, 0),
        first_id: StreamId::new(1, 0),
        max_deleted_entry_id: StreamId::MIN,
        entries_added: 3,
    };
    let node = |ms, last, live, deleted| StreamElem::Node {
        master_id: StreamId::new(ms, 0),
        last_id: StreamId::new(last, 0),
        live,
        deleted,
        body_bytes: 40,
        master_fields: vec![Blob::from(&b"f"[..])].into(),
    };
    // A 1.0 record has no nodes: the entries are appended.
    let s = finish_stream(vec![entry(1), entry(2), entry(3), counters()]).unwrap();
    assert_eq!((s.len(), s.node_count()), (3, 1));
    // 1.1: the layout as recorded, a node of tombstones included.
    let elems = vec![node(0, 0, 0, 1), node(1, 3, 3, 0)];
    let all = [
        elems.clone(),
        vec![entry(1), entry(2), entry(3), counters()],
    ]
    .concat();
    let s = finish_stream(all).unwrap();
    assert_eq!((s.len(), s.node_count()), (3, 2));
    let layouts: Vec<_> = s.node_layouts().map(|n| (n.live, n.deleted)).collect();
    assert_eq!(layouts, [(0, 1), (3, 0)]);
    // Live counts that do not add up, empty nodes, nodes out of order
    // or after the entries are malformed.
    let bad = [
        vec![node(1, 3, 2, 0), entry(1), entry(2), entry(3), counters()],
        vec![
            node(0, 0, 0, 0),
            node(1, 3, 3, 0),
            entry(1),
            entry(2),
            entry(3),
            counters(),
        ],
        vec![
            node(1, 3, 3, 0),
            node(0, 0, 0, 1),
            entry(1),
            entry(2),
            entry(3),
            counters(),
        ],
        vec![
            node(1, 3, 1, 0),
            entry(1),
            node(2, 3, 2, 0),
            entry(2),
            entry(3),
            counters(),
        ],
    ];
    for elems in bad {
        assert!(finish_stream(elems.clone()).is_err(), "{elems:?}");
    }
}

#[test]
fn unknown_versions_and_flags_are_refused_by_name() {
    let (_, data, _) = save_mem(&random_keyspace(1, 5), BLOCK_TARGET_BYTES);
    let header_len = le_u32(&data, 16) as usize;
    let refix = |mut d: Vec<u8>| {
        let crc = crc32fast::hash(&d[..header_len - 4]);
        d[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
        d
    };
    let mut v2 = data.clone();
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    v2[10..12].copy_from_slice(&3u16.to_le_bytes());
    let err = load(&refix(v2.clone()), &read(0, limits(), NOW_MS)).unwrap_err();
    assert!(matches!(
        err,
        SnapshotError::UnsupportedVersion { major: 2, minor: 3 }
    ));
    assert_eq!(
        err.to_string(),
        "unsupported snapshot format version 2.3 (this build reads 1.x)"
    );
    let (loaded, damages) = load_salvaging(&refix(v2), &read(0, limits(), NOW_MS));
    assert!(loaded.is_empty() && damages.len() == 1);
    // A newer minor version loads: tests/position.rs relabels a file with
    // 1.2's position fields (a later minor version has them too: minor
    // versions only add).
    let mut flags = data.clone();
    flags[12..16].copy_from_slice(&0x11u32.to_le_bytes());
    let err = load(&refix(flags), &read(0, limits(), NOW_MS)).unwrap_err();
    assert!(err.to_string().contains("unknown bits 0x10"), "{err}");
    // The trailer's version is checked by read_summary alone.
    let mut t = data.clone();
    let at = t.len() - TRAILER_LEN;
    t[at + 20..at + 22].copy_from_slice(&7u16.to_le_bytes());
    let crc = crc32fast::hash(&t[at..at + 24]);
    t[at + 24..at + 28].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        read_summary(&t),
        Err(SnapshotError::UnsupportedVersion { major: 7, .. })
    ));
}

#[test]
fn random_bytes_never_panic() {
    fn prop(data: Vec<u8>, prefix: bool) -> bool {
        let mut d = data;
        if prefix {
            let mut h = MAGIC.to_vec();
            h.extend_from_slice(&d);
            d = h;
        }
        let _ = load(&d, &read(2, EncodingLimits::default(), NOW_MS));
        let _ = load_salvaging(&d, &read(2, EncodingLimits::default(), NOW_MS));
        let _ = read_summary(&d);
        true
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
}

/// The record decoder meets garbage only when a writer is buggy (the
/// CRC guards the rest), but even then it must not panic or
/// over-allocate: feed it mutated real payloads and random bytes.
#[test]
fn record_decoder_survives_mutated_payloads() {
    let ks = random_keyspace(21, 80);
    let mut builder = BlockBuilder::with_block_size(700);
    let mut blocks = Vec::new();
    for i in 0..ks.db_count() {
        let db = ks.db(i);
        for (k, v) in db.iter() {
            blocks.extend(builder.push(i, k, v, db.expire_at(k)));
        }
    }
    blocks.extend(builder.finish());
    let mut rng = Rng::with_seed(99);
    let small = EncodingLimits {
        hash_max_listpack_entries: 3,
        zset_max_listpack_entries: 2,
        set_max_intset_entries: 2,
        ..limits()
    };
    let mut errors = 0;
    for round in 0..20_000 {
        let b = &blocks[round % blocks.len()];
        let mut raw = b.data.clone();
        match rng.below(4) {
            0 => {
                let at = rng.index(raw.len());
                raw[at] ^= 1 << rng.below(8);
            }
            1 => {
                let at = rng.index(raw.len());
                raw[at] = rng.below(256) as u8;
            }
            2 => raw.truncate(rng.index(raw.len())),
            _ => {
                for _ in 0..4 {
                    let at = rng.index(raw.len());
                    raw[at] = [0x00, 0x7f, 0x80, 0xff][rng.index(4)];
                }
            }
        }
        let lim = if round % 2 == 0 { limits() } else { small };
        let decoded = decode_records(&raw, b.records, &lim, NOW_MS);
        errors += usize::from(decoded.damage.is_some());
        let mut s = Stitcher::new(&read(0, lim, NOW_MS));
        let mut out = Vec::new();
        let mut problems = Vec::new();
        s.accept(0, decoded, &mut out, &mut problems);
    }
    assert!(errors > 1000, "mutations mostly detected ({errors})");
}

#[test]
fn footer_decoder_survives_mutated_footers() {
    let (_, data, summary) = save_mem(&random_keyspace(4, 100), 1000);
    let footer = &data[summary.footer_offset as usize..data.len() - TRAILER_LEN];
    let mut rng = Rng::with_seed(4);
    for _ in 0..20_000 {
        let mut f = footer.to_vec();
        for _ in 0..1 + rng.below(3) {
            let at = rng.index(f.len());
            f[at] = rng.next_u64() as u8;
        }
        if rng.below(4) == 0 {
            f.truncate(rng.index(f.len()));
        }
        let mut s = Summary::default();
        let _ = decode_footer(&f, &mut s);
        // A footer that decodes but lies is caught by the index check.
        let _ = check_index(summary.blocks[0].offset as usize, &s);
    }
}

#[test]
fn malformed_records_are_rejected() {
    let l = limits();
    let rec = |body: &[u8]| {
        let mut r = vec![TAG_HASH, 0, 1, b'k'];
        r.extend_from_slice(body);
        r
    };
    let two_same = {
        let mut b = 2u32.to_le_bytes().to_vec();
        b.extend_from_slice(&[1, b'f', 1, b'v', 1, b'f', 1, b'w']);
        b
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (rec(&two_same), "duplicate hash fields detected"),
        (rec(&0u32.to_le_bytes()), "empty hash"),
        (rec(&5u32.to_le_bytes()), "ends inside a record"),
        (vec![0x07, 0, 0, 0], "unknown type tag"),
        (vec![0x80, 0, 0, 0], "unknown access record kind"),
        (vec![0x80, 0, 0, 3, 0], "unknown access record kind"),
        (
            vec![0x80, 0, 0, 1, 0x80, 0x80, 0x80, 0x08],
            "idle time past the LRU clock's range",
        ),
        (
            vec![0x80 | (3 << 5), 0, 0, 2, 7],
            "access record on a continuation",
        ),
        (vec![0x80, 0, 0, 2], "ends inside a record"),
        (
            vec![TAG_STRING | KIND_EXPIRE | (2 << 5), 0, 0, 0],
            "expiry on a continuation",
        ),
        (vec![TAG_STRING, 0, 9, b'k'], "a length runs past the end"),
        (
            vec![
                TAG_STRING, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ],
            "varint overflows",
        ),
    ];
    for (raw, want) in cases {
        let d = decode_records(&raw, 1, &l, NOW_MS);
        let damage = d.damage.expect("malformed");
        assert!(
            damage.to_string().contains(want),
            "{damage} (wanted {want})"
        );
    }
    // A zset out of order or with NaN; a set with repeated members.
    let mut z = vec![TAG_ZSET, 0, 1, b'z'];
    z.extend_from_slice(&2u32.to_le_bytes());
    for (m, s) in [(b'b', 1.0f64), (b'a', 1.0)] {
        z.extend_from_slice(&[1, m]);
        z.extend_from_slice(&s.to_bits().to_le_bytes());
    }
    let d = decode_records(&z, 1, &l, NOW_MS);
    assert!(d.damage.expect("bad").to_string().contains("not ascending"));
    let mut s = vec![TAG_SET_STRINGS, 0, 1, b's'];
    s.extend_from_slice(&2u32.to_le_bytes());
    s.extend_from_slice(&[2, b'0', b'7', 2, b'0', b'7']);
    let d = decode_records(&s, 1, &l, NOW_MS);
    assert!(d
        .damage
        .expect("bad")
        .to_string()
        .contains("duplicate set members detected"));
    // Bytes after the last record.
    let d = decode_records(&[TAG_STRING, 0, 1, b'k', 1, b'v', 0], 1, &l, NOW_MS);
    assert!(d
        .damage
        .expect("bad")
        .to_string()
        .contains("after the last record"));
}

#[test]
fn duplicate_keys_and_unknown_databases_are_errors() {
    let io = FaultyIo::new();
    let path = Path::new("/d/t");
    let mut w = FileWriter::create(Arc::new(io.clone()), path, HeaderInfo::new(NOW_MS, 16))
        .expect("create");
    let mut b = BlockBuilder::new();
    let v = Value::Str(Blob::from("v"));
    assert!(b.push(0, b"k", &v, None).is_empty());
    assert!(b.push(0, b"k", &v, None).is_empty());
    w.write_block(b.finish().expect("a block")).expect("write");
    w.finish(b.stats()).expect("finish");
    let data = io.contents(path).expect("file");
    let loaded = load(&data, &read(0, limits(), NOW_MS)).expect("decodes");
    let err = loaded.into_keyspace(&mut Keyspace::new(16)).unwrap_err();
    assert!(
        matches!(err, SnapshotError::DuplicateKey { db: 0, .. }),
        "{err}"
    );
}
