//! Tests of the reader: scan_keys, salvage, and load against them.

use std::ops::ControlFlow;

use super::*;
use crate::rdb::writer::{encode_file, Encoder};
use crate::types::hash::Hash;
use crate::types::list::{End, List};
use scan::CRC_STEP_BYTES;

/// A file with one key of each kind in databases 0 and 2: (db, key,
/// value, expiry ms). Keys are long enough that LZF applies to one.
fn sample() -> Vec<u8> {
    let limits = EncodingLimits::default();
    let mut list = List::new();
    for item in ["a", "b", "c"] {
        list.push(End::Tail, item.as_bytes());
    }
    let mut hash = Hash::new();
    hash.set(b"f1", Blob::from(&b"v1"[..]), &limits);
    hash.set(b"f2", Blob::from(&b"v2"[..]), &limits);
    let mut set = Set::default();
    for m in ["1", "2", "3", "4"] {
        set.insert(m.as_bytes(), 512);
    }
    let mut big = Set::default();
    for i in 0..600 {
        big.insert(i.to_string().as_bytes(), 512);
    }
    let keys: Vec<(usize, Blob, Value, Option<i64>)> = vec![
        (
            0,
            Blob::from(&b"str"[..]),
            Value::Str(Blob::from(&b"v"[..])),
            Some(1_800_000_000_123),
        ),
        (
            0,
            Blob::from(&b"12345"[..]),
            Value::Str(Blob::from(&b"int key"[..])),
            None,
        ),
        (
            0,
            Blob::from(&[b'z'; 64][..]),
            Value::Str(Blob::from(&b"lzf key"[..])),
            None,
        ),
        (
            0,
            Blob::from(&b"list"[..]),
            Value::List(Box::new(list)),
            None,
        ),
        (
            2,
            Blob::from(&b"hash"[..]),
            Value::Hash(Box::new(hash)),
            None,
        ),
        (
            2,
            Blob::from(&b"set"[..]),
            Value::Set(Box::new(set)),
            Some(1),
        ),
        (2, Blob::from(&b"big"[..]), Value::Set(Box::new(big)), None),
    ];
    encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(db, k, v, e)| (*db, k, v, *e)),
    )
}

fn collect(data: &[u8]) -> (Vec<KeyInfo<'static>>, Result<ScanSummary, RdbError>) {
    let mut seen = Vec::new();
    let result = scan_keys(data, &mut |k| {
        seen.push(KeyInfo {
            key: Cow::Owned(k.key.to_vec()),
            ..k.clone()
        });
        ControlFlow::Continue(())
    });
    (seen, result)
}

#[test]
fn scan_keys_checks_the_crc_of_files_larger_than_its_running_step() {
    // Incompressible strings (LZF gives up on them), 16 MB in all, so
    // the running CRC is updated several times before the end.
    let mut rng = crate::rand::Rng::with_seed(7);
    let keys: Vec<(Blob, Value)> = (0..4000)
        .map(|i| {
            let value: Vec<u8> = (0..4096).map(|_| rng.below(256) as u8).collect();
            (
                Blob::from(format!("k{i}").as_bytes()),
                Value::Str(Blob::from(&value[..])),
            )
        })
        .collect();
    let data = encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(k, v)| (0, k, v, None)),
    );
    assert!(data.len() > 3 * CRC_STEP_BYTES);
    let (seen, result) = collect(&data);
    assert_eq!(seen.len(), 4000);
    assert_eq!(result.expect("valid").checksum, Some(Checksum::Verified));
    // A flipped byte anywhere in a value is caught by the CRC.
    for at in [100, data.len() / 2, data.len() - 20] {
        let mut bad = data.clone();
        bad[at] ^= 0x01;
        assert!(collect(&bad).1.is_err(), "flip at {at}");
    }
}

#[test]
fn scan_keys_reports_every_key_with_its_facts() {
    let data = sample();
    let (seen, result) = collect(&data);
    let summary = result.expect("a valid file");
    let names: Vec<(usize, &[u8], &str)> = seen
        .iter()
        .map(|k| (k.db, &k.key[..], k.logical_type))
        .collect();
    assert_eq!(
        names,
        vec![
            (0, &b"str"[..], "string"),
            (0, &b"12345"[..], "string"),
            (0, &[b'z'; 64][..], "string"),
            (0, &b"list"[..], "list"),
            (2, &b"hash"[..], "hash"),
            (2, &b"set"[..], "set"),
            (2, &b"big"[..], "set"),
        ]
    );
    assert_eq!(seen[0].expire_ms, Some(1_800_000_000_123));
    assert_eq!(seen[5].expire_ms, Some(1));
    assert!(seen.iter().filter(|k| k.expire_ms.is_some()).count() == 2);
    // Raw keys are borrowed; integer-encoded and LZF ones are not.
    let elements: Vec<Option<u64>> = seen.iter().map(|k| k.elements).collect();
    assert_eq!(
        elements,
        vec![None, None, None, Some(3), Some(2), Some(4), Some(600)]
    );
    assert_eq!(seen[5].type_byte, kind::SET_INTSET);
    assert_eq!(seen[6].type_byte, kind::SET);
    // The same totals as the skip pass, byte for byte.
    let plain = scan(&data).expect("a valid file");
    // (Each walk reads the clock for its own "expired".)
    let summary = ScanSummary {
        scanned_at_ms: plain.scanned_at_ms,
        ..summary
    };
    assert_eq!(summary, plain);
    let bytes: u64 = seen.iter().map(|k| k.record_bytes).sum();
    assert_eq!(bytes, plain.types.values().map(|t| t.bytes).sum::<u64>());
    for k in &seen {
        assert_eq!(data[k.offset as usize], k.type_byte);
    }
}

#[test]
fn scan_keys_borrows_raw_keys_and_decodes_encoded_ones() {
    let data = sample();
    let mut borrowed = Vec::new();
    scan_keys(&data, &mut |k| {
        borrowed.push(matches!(k.key, Cow::Borrowed(_)));
        ControlFlow::Continue(())
    })
    .expect("a valid file");
    assert_eq!(borrowed, [true, false, false, true, true, true, true]);
}

#[test]
fn scan_keys_stops_on_break_and_on_damage_after_earlier_keys() {
    let data = sample();
    let mut n = 0;
    let summary = scan_keys(&data, &mut |_| {
        n += 1;
        if n == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .expect("a valid file");
    assert_eq!(n, 2);
    assert_eq!(summary.checksum, None);
    assert_eq!(summary.keys_per_db.values().sum::<u64>(), 2);
    // Cut inside the big set: the six keys before it are seen.
    let (full, _) = collect(&data);
    let cut = full[6].offset as usize + 20;
    let (seen, result) = collect(&data[..cut]);
    assert_eq!(seen.len(), 6);
    let e = result.expect_err("a truncated file");
    assert_eq!(e.kind, ErrorKind::Truncated);
    assert!(e.offset as usize <= cut);
    // A flipped byte in the trailer: every key seen, then the checksum fails.
    let mut flipped = data.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let (seen, result) = collect(&flipped);
    assert_eq!(seen.len(), 7);
    assert_eq!(result.expect_err("a bad CRC").kind, ErrorKind::Checksum);
}

/// 40 small hashes (listpacks) in db 0 and 3, keyed `h:<i>`.
fn hashes() -> Vec<u8> {
    let limits = EncodingLimits::default();
    let keys: Vec<(usize, Blob, Value)> = (0..40)
        .map(|i| {
            let mut h = Hash::new();
            for f in 0..3 {
                h.set(
                    format!("field{f}").as_bytes(),
                    Blob::from(format!("value {i}/{f}").as_bytes()),
                    &limits,
                );
            }
            let db = if i < 20 { 0 } else { 3 };
            (
                db,
                Blob::from(format!("h:{i}").as_bytes()),
                Value::Hash(Box::new(h)),
            )
        })
        .collect();
    encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(db, k, v)| (*db, k, v, None)),
    )
}

fn salvage_options() -> Options {
    Options {
        limits: EncodingLimits::default(),
        databases: 16,
        skip_expired_before_ms: None,
        now_ms: 0,
    }
}

fn salvaged(data: &[u8]) -> (Vec<(usize, Vec<u8>)>, SalvageReport) {
    let mut keys = Vec::new();
    let report = salvage(data, &salvage_options(), &mut |_, k| {
        keys.push((k.db, k.key.to_vec()));
        Ok(())
    })
    .expect("the header is intact");
    (keys, report)
}

fn record_offsets(data: &[u8]) -> Vec<(u64, (usize, Vec<u8>))> {
    let (seen, result) = collect(data);
    result.expect("a valid file");
    seen.iter()
        .map(|k| (k.offset, (k.db, k.key.to_vec())))
        .collect()
}

#[test]
fn salvage_of_an_intact_file_reads_what_load_reads() {
    let data = sample();
    let (keys, report) = salvaged(&data);
    let want: Vec<_> = record_offsets(&data).into_iter().map(|(_, k)| k).collect();
    assert_eq!(keys, want);
    assert!(report.damaged.is_empty());
    assert_eq!(report.checksum, Some(Ok(Checksum::Verified)));
    assert_eq!(report.len, data.len() as u64);
    assert_eq!(report.eof_at, Some(data.len() as u64 - 9));
}

/// Found by the `repair_salvage` fuzz target: salvage read a Valkey
/// file's type 21 (a hash with field TTLs) as Redis 7.4-rc's type 21,
/// so an intact Valkey 9 file came out with its hash as damage.
#[test]
fn salvage_of_an_intact_valkey_file_reads_what_load_reads() {
    let data = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/rdb/valkey9.rdb"
    ))
    .to_vec();
    let mut loaded = Vec::new();
    load(&data, &salvage_options(), &mut |k| {
        loaded.push((k.db, k.key.to_vec()));
        Ok(())
    })
    .expect("the fixture loads");
    let (keys, report) = salvaged(&data);
    assert!(report.damaged.is_empty(), "{:?}", report.damaged);
    assert!(loaded.contains(&(0, b"hash:hfe".to_vec())), "{loaded:?}");
    assert_eq!(keys, loaded);
}

#[test]
fn salvage_resynchronises_after_a_damaged_record() {
    let data = hashes();
    let records = record_offsets(&data);
    for victim in [0usize, 10, 25, 39] {
        let (start, _) = records[victim];
        let mut bad = data.clone();
        // The listpack's total-bytes field, just after the key and the
        // string length of the listpack: the record no longer decodes.
        let key_len = 1 + format!("h:{victim}").len();
        bad[start as usize + 1 + key_len + 1] ^= 0x5a;
        let (keys, report) = salvaged(&bad);
        let want: Vec<_> = records
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, (_, k))| k.clone())
            .collect();
        assert_eq!(keys, want, "victim {victim}");
        assert_eq!(report.damaged.len(), 1, "{:?}", report.damaged);
        let region = &report.damaged[0];
        assert_eq!(region.start, start);
        assert!(region.resumed);
        let next = records
            .get(victim + 1)
            .map_or(data.len() as u64 - 9, |r| r.0);
        // Resumed at the next record (a SELECTDB may come first).
        assert!(region.end <= next && region.end > start, "{region:?}");
        assert_eq!(
            region.error.key.as_ref().map(|(_, k)| k.to_vec()),
            Some(format!("h:{victim}").into_bytes())
        );
        assert!(matches!(report.checksum, Some(Err(_))));
    }
}

#[test]
fn salvage_of_a_truncated_file_keeps_the_records_before_the_cut() {
    let data = hashes();
    let records = record_offsets(&data);
    let cut = records[30].0 as usize + 7;
    let (keys, report) = salvaged(&data[..cut]);
    let want: Vec<_> = records[..30].iter().map(|(_, k)| k.clone()).collect();
    assert_eq!(keys, want);
    assert_eq!(report.damaged.len(), 1);
    assert_eq!(report.damaged[0].start, records[30].0);
    assert_eq!(report.damaged[0].end, cut as u64);
    assert!(!report.damaged[0].resumed);
    assert_eq!(report.checksum, None);
    // Cut inside the checksum.
    let (keys, report) = salvaged(&data[..data.len() - 3]);
    assert_eq!(keys.len(), 40);
    assert!(report.damaged.is_empty());
    assert!(matches!(report.checksum, Some(Err(ref e)) if e.kind == ErrorKind::Truncated));
}

#[test]
fn salvage_reports_a_wrong_checksum_and_keeps_every_key() {
    let mut data = hashes();
    let n = data.len();
    data[n - 2] ^= 1;
    let (keys, report) = salvaged(&data);
    assert_eq!(keys.len(), 40);
    assert!(report.damaged.is_empty());
    assert!(matches!(report.checksum, Some(Err(ref e)) if e.kind == ErrorKind::Checksum));
    // Trailing bytes are left to the caller: `len` is where the image ends.
    let mut longer = hashes();
    longer.extend_from_slice(b"junk");
    let (_, report) = salvaged(&longer);
    assert_eq!(report.len, longer.len() as u64 - 4);
    assert_eq!(report.checksum, Some(Ok(Checksum::Verified)));
}

#[test]
fn salvage_never_panics_on_damaged_files() {
    let data = hashes();
    let mut rng = crate::rand::Rng::with_seed(7);
    for round in 0..300 {
        let mut bad = data.clone();
        for _ in 0..1 + round % 3 {
            let at = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
            bad[at] = rng.next_u64() as u8;
        }
        if round % 4 == 0 {
            let cut = 9 + (rng.next_u64() as usize) % (bad.len() - 9);
            bad.truncate(cut);
        }
        let (keys, report) = salvaged(&bad);
        assert!(keys.len() <= 41, "round {round}");
        for r in &report.damaged {
            assert!(r.start < r.end || r.end == bad.len() as u64, "{r:?}");
        }
    }
}

// -- The replication position in AUX fields --------------------------------

fn repl_position(id: &[u8], offset: i64, stream_db: u32) -> crate::repl::ids::Position {
    crate::repl::ids::Position {
        replid: crate::repl::ids::ReplId::parse(id).expect("40 hex digits"),
        offset,
        stream_db,
    }
}

/// A file whose header records `position`, with one key in db 1.
fn file_with_position(encoder: &Encoder, position: Option<&crate::repl::ids::Position>) -> Vec<u8> {
    let mut out = Vec::new();
    encoder.put_header_with_position(&mut out, 1_700_000_000_000, 1234, false, position);
    encoder.put_select(&mut out, 1, 1, 0);
    encoder.put_key(&mut out, b"k", &Value::Str(Blob::from(&b"v"[..])), None);
    let mut crc = crate::rdb::Crc64::default();
    crate::rdb::writer::put_trailer(&mut out, &mut crc, true);
    out
}

fn load_summary(data: &[u8]) -> Summary {
    load(data, &salvage_options(), &mut |_| Ok(())).expect("loads")
}

fn aux_names(summary: &Summary) -> Vec<String> {
    summary
        .aux
        .iter()
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .collect()
}

#[test]
fn a_replication_position_round_trips_through_the_aux_fields() {
    for encoder in [
        Encoder::default(),
        Encoder {
            compress: false,
            ..Encoder::default()
        },
    ] {
        for p in [
            repl_position(b"adcf22fc7d55e35c0672967184096f52cc427d30", 81, 3),
            repl_position(b"0000000000000000000000000000000000000000", 0, 0),
            repl_position(
                b"ABCDEF0123ABCDEF0123ABCDEF0123ABCDEF0123",
                i64::MAX,
                u32::MAX,
            ),
            repl_position(b"1111111111111111111111111111111111111111", 1 << 40, 15),
        ] {
            let data = file_with_position(&encoder, Some(&p));
            let summary = load_summary(&data);
            assert_eq!(summary.position, Some(p));
            assert_eq!(summary.keys, 1);
            assert_eq!(
                aux_names(&summary),
                [
                    "redis-ver",
                    "redis-bits",
                    "ctime",
                    "used-mem",
                    "repl-stream-db",
                    "repl-id",
                    "repl-offset",
                    "aof-base",
                    "hozon-ver"
                ],
                "Redis's order"
            );
            assert_eq!(scan(&data).expect("scan").position(), Some(p));
            let (_, report) = salvaged(&data);
            assert_eq!(report.position(), Some(p));
        }
    }
}

#[test]
fn without_a_position_the_header_is_unchanged() {
    let encoder = Encoder::default();
    let mut plain = Vec::new();
    encoder.put_header(&mut plain, 1_700_000_000_000, 1234, true);
    let mut none = Vec::new();
    encoder.put_header_with_position(&mut none, 1_700_000_000_000, 1234, true, None);
    assert_eq!(plain, none);
    let data = file_with_position(&encoder, None);
    let summary = load_summary(&data);
    assert_eq!(summary.position, None);
    assert!(!aux_names(&summary).iter().any(|n| n.starts_with("repl-")));
    assert_eq!(scan(&data).expect("scan").position(), None);
}

#[test]
fn the_aux_fields_are_encoded_as_redis_encodes_them() {
    // The bytes Redis 7.0's rdbSaveInfoAuxFields writes (as in the
    // fixture below): integer strings integer-encoded when they fit 32
    // bits, the id raw (it does not compress), a 64-bit offset as text.
    let p = repl_position(b"adcf22fc7d55e35c0672967184096f52cc427d30", 81, 3);
    let mut expected = Vec::new();
    expected.extend_from_slice(b"\xfa\x0erepl-stream-db\xc0\x03");
    expected.extend_from_slice(b"\xfa\x07repl-id\x28adcf22fc7d55e35c0672967184096f52cc427d30");
    expected.extend_from_slice(b"\xfa\x0brepl-offset\xc0\x51");
    expected.extend_from_slice(b"\xfa\x08aof-base\xc0\x00");
    let mut out = Vec::new();
    Encoder::default().put_header_with_position(&mut out, 0, 0, false, Some(&p));
    let found = out.windows(expected.len()).position(|w| w == &expected[..]);
    assert!(found.is_some(), "{out:?}");
    let big = repl_position(b"adcf22fc7d55e35c0672967184096f52cc427d30", 70_000, 300);
    let mut out = Vec::new();
    Encoder::default().put_header_with_position(&mut out, 0, 0, false, Some(&big));
    let db = b"\xfa\x0erepl-stream-db\xc1\x2c\x01";
    assert!(out.windows(db.len()).any(|w| w == db));
    let offset = b"\xfa\x0brepl-offset\xc2\x70\x11\x01\x00";
    assert!(out.windows(offset.len()).any(|w| w == offset));
    let wide = repl_position(b"adcf22fc7d55e35c0672967184096f52cc427d30", 1 << 33, 0);
    let mut out = Vec::new();
    Encoder::default().put_header_with_position(&mut out, 0, 0, false, Some(&wide));
    let offset = b"\xfa\x0brepl-offset\x0a8589934592";
    assert!(out.windows(offset.len()).any(|w| w == offset));
}

/// A file Redis 7.0.15 wrote as a master with a replica attached
/// (fixtures/rdb/README.md): its position is read.
#[test]
fn the_position_of_a_file_redis_wrote_is_read() {
    let data = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/rdb/repl_position.rdb"
    ))
    .to_vec();
    let p = repl_position(b"adcf22fc7d55e35c0672967184096f52cc427d30", 81, 3);
    let summary = load_summary(&data);
    assert_eq!(summary.position, Some(p));
    assert_eq!(summary.keys, 2);
    assert_eq!(scan(&data).expect("scan").position(), Some(p));
    // hozon writes the same AUX bytes for the same position (the values
    // before them, ctime and used-mem, differ).
    let mut ours = Vec::new();
    Encoder::default().put_header_with_position(&mut ours, 0, 0, false, Some(&p));
    let from = |d: &[u8]| {
        let at = d
            .windows(16)
            .position(|w| w == b"\xfa\x0erepl-stream-db")
            .expect("the fields");
        let end = d[at..]
            .windows(10)
            .position(|w| w == b"\xfa\x08aof-base")
            .expect("aof-base")
            + at;
        d[at..end].to_vec()
    };
    assert_eq!(from(&ours), from(&data));
}

#[test]
fn a_malformed_or_missing_position_field_means_no_position() {
    let id: &[u8] = b"adcf22fc7d55e35c0672967184096f52cc427d30";
    let file = |fields: &[(&str, &[u8])]| {
        let encoder = Encoder::default();
        let mut out = Vec::new();
        encoder.put_header(&mut out, 0, 0, false);
        for (name, value) in fields {
            encoder.put_aux(&mut out, name, value);
        }
        encoder.put_select(&mut out, 0, 1, 0);
        encoder.put_key(&mut out, b"k", &Value::Str(Blob::from(&b"v"[..])), None);
        let mut crc = crate::rdb::Crc64::default();
        crate::rdb::writer::put_trailer(&mut out, &mut crc, true);
        out
    };
    let good = repl_position(id, 81, 3);
    /// What, the AUX fields added, the position expected.
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a [u8])>,
        Option<crate::repl::ids::Position>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "all three",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", id),
                ("repl-offset", b"81"),
            ],
            Some(good),
        ),
        (
            "names without case, the last one counts",
            vec![
                ("repl-offset", b"7"),
                ("REPL-STREAM-DB", b"3"),
                ("Repl-Id", id),
                ("repl-offset", b"81"),
            ],
            Some(good),
        ),
        (
            "no id",
            vec![("repl-stream-db", b"3"), ("repl-offset", b"81")],
            None,
        ),
        (
            "no offset",
            vec![("repl-stream-db", b"3"), ("repl-id", id)],
            None,
        ),
        ("no db", vec![("repl-id", id), ("repl-offset", b"81")], None),
        (
            "short id",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", &id[1..]),
                ("repl-offset", b"81"),
            ],
            None,
        ),
        (
            "id not hex",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", b"xdcf22fc7d55e35c0672967184096f52cc427d30"),
                ("repl-offset", b"81"),
            ],
            None,
        ),
        (
            "offset not an integer",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", id),
                ("repl-offset", b"81abc"),
            ],
            None,
        ),
        (
            "negative offset",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", id),
                ("repl-offset", b"-1"),
            ],
            None,
        ),
        (
            "db beyond 32 bits",
            vec![
                ("repl-stream-db", b"4294967296"),
                ("repl-id", id),
                ("repl-offset", b"81"),
            ],
            None,
        ),
        (
            "negative db",
            vec![
                ("repl-stream-db", b"-1"),
                ("repl-id", id),
                ("repl-offset", b"81"),
            ],
            None,
        ),
        (
            "a later malformed one replaces a good one",
            vec![
                ("repl-stream-db", b"3"),
                ("repl-id", id),
                ("repl-offset", b"81"),
                ("repl-offset", b""),
            ],
            None,
        ),
    ];
    for (what, fields, expected) in cases {
        let data = file(&fields);
        let summary = load_summary(&data);
        assert_eq!(summary.position, expected, "{what}");
        assert_eq!(summary.keys, 1, "{what}: the file loads");
        assert_eq!(
            summary.aux.len(),
            6 + fields.len(),
            "{what}: the fields are kept"
        );
        assert_eq!(scan(&data).expect("scan").position(), expected, "{what}");
    }
}

/// A payload revealed a few bytes at a time by another thread.
struct Revealed {
    state: std::sync::Mutex<(usize, bool, Option<String>)>,
    cond: std::sync::Condvar,
}

impl Revealed {
    fn new() -> Revealed {
        Revealed {
            state: std::sync::Mutex::new((0, false, None)),
            cond: std::sync::Condvar::new(),
        }
    }

    fn set(&self, avail: usize, ended: bool, failure: Option<&str>) {
        let mut s = self.state.lock().unwrap();
        *s = (avail, ended, failure.map(str::to_string));
        self.cond.notify_all();
    }
}

impl Feed for Revealed {
    fn wait_for(&self, end: usize) -> Result<usize, String> {
        let mut s = self.state.lock().unwrap();
        loop {
            if let Some(reason) = &s.2 {
                return Err(reason.clone());
            }
            if s.0 >= end || s.1 {
                return Ok(s.0);
            }
            s = self.cond.wait(s).unwrap();
        }
    }
}

/// A key and its database.
type DbKey = (usize, Vec<u8>);

/// Loads `data` through a feed that reveals `limit` of its bytes in steps
/// of `step` (then says no more come); returns the keys and the result.
fn load_revealed(
    data: &[u8],
    limit: usize,
    step: usize,
) -> (Vec<DbKey>, Result<Summary, RdbError>) {
    let feed = Revealed::new();
    let mut keys = Vec::new();
    let result = std::thread::scope(|scope| {
        let feed = &feed;
        scope.spawn(move || {
            let mut avail = 0;
            while avail < limit {
                avail = (avail + step).min(limit);
                feed.set(avail, false, None);
                std::thread::yield_now();
            }
            feed.set(limit, true, None);
        });
        load_streaming(
            data,
            feed,
            &salvage_options(),
            &mut |k| {
                keys.push((k.db, k.key.to_vec()));
                Ok(())
            },
            &mut |_, _, _| {},
        )
    });
    (keys, result)
}

#[test]
fn a_streamed_load_reads_what_a_whole_load_reads() {
    for data in [sample(), hashes()] {
        let mut whole = Vec::new();
        let expected = load(&data, &salvage_options(), &mut |k| {
            whole.push((k.db, k.key.to_vec()));
            Ok(())
        })
        .expect("a valid file");
        for step in [1, 7, 64, 4096, data.len()] {
            let (keys, result) = load_revealed(&data, data.len(), step);
            let summary = result.expect("the whole payload came");
            assert_eq!(keys, whole, "step {step}");
            assert_eq!(summary.len, expected.len);
            assert_eq!(summary.checksum, Some(Checksum::Verified));
        }
    }
}

#[test]
fn a_streamed_load_of_a_cut_payload_fails_as_a_truncated_file_does() {
    let data = hashes();
    for cut in (0..data.len()).step_by(13) {
        let (_, result) = load_revealed(&data, cut, 5);
        let streamed = result.expect_err("a cut payload");
        let whole =
            load(&data[..cut], &salvage_options(), &mut |_| Ok(())).expect_err("a cut file");
        assert_eq!(streamed.kind, whole.kind, "cut at {cut}");
        assert_eq!(streamed.offset, whole.offset, "cut at {cut}");
    }
}

#[test]
fn an_abandoned_streamed_load_stops_with_the_reason() {
    let data = hashes();
    let half = data.len() / 2;
    let feed = Revealed::new();
    let result = std::thread::scope(|scope| {
        let feed = &feed;
        scope.spawn(move || {
            feed.set(half, false, None);
            std::thread::sleep(std::time::Duration::from_millis(20));
            feed.set(half, false, Some("the link was lost"));
        });
        load_streaming(
            &data,
            feed,
            &salvage_options(),
            &mut |_| Ok(()),
            &mut |_, _, _| {},
        )
    });
    let e = result.expect_err("abandoned");
    assert_eq!(e.kind, ErrorKind::Truncated);
    assert!(e.message.contains("the link was lost"), "{}", e.message);
}

/// 3000 keys of every kind over three databases, some expiring (some
/// already past), in several of the parallel reader's batches.
fn many() -> Vec<u8> {
    let limits = EncodingLimits::default();
    let keys: Vec<(usize, Blob, Value, Option<i64>)> = (0..3000)
        .map(|i| {
            let value = match i % 4 {
                0 => Value::Str(Blob::from(
                    format!("value {i} {}", "x".repeat(i % 50)).as_bytes(),
                )),
                1 => {
                    let mut h = Hash::new();
                    for f in 0..(i % 7 + 1) {
                        h.set(
                            format!("f{f}").as_bytes(),
                            Blob::from(format!("{i}/{f}").as_bytes()),
                            &limits,
                        );
                    }
                    Value::Hash(Box::new(h))
                }
                2 => {
                    let mut l = List::new();
                    for e in 0..(i % 5 + 1) {
                        l.push(End::Tail, format!("e{e}").as_bytes());
                    }
                    Value::List(Box::new(l))
                }
                _ => {
                    let mut s = Set::default();
                    for m in 0..(i % 9 + 1) {
                        s.insert((m * 7).to_string().as_bytes(), 512);
                    }
                    Value::Set(Box::new(s))
                }
            };
            let expire = match i % 10 {
                0 => Some(1_000),
                1 => Some(4_000_000_000_000),
                _ => None,
            };
            (
                i % 3 * 2,
                Blob::from(format!("key:{i}").as_bytes()),
                value,
                expire,
            )
        })
        .collect();
    let mut keys = keys;
    keys.sort_by_key(|k| k.0);
    encode_file(
        &Encoder::default(),
        1_700_000_000_000,
        keys.iter().map(|(db, k, v, e)| (*db, k, v, *e)),
    )
}

/// The keys and summary (or error) of the whole-file load and of the
/// streamed one, with expired keys skipped.
fn both_loads(data: &[u8]) -> [(Vec<DbKey>, Result<Summary, RdbError>); 2] {
    let options = Options {
        skip_expired_before_ms: Some(2_000),
        ..salvage_options()
    };
    let mut whole = Vec::new();
    let whole_result = load(data, &options, &mut |k| {
        whole.push((k.db, k.key.to_vec()));
        Ok(())
    });
    let feed = Revealed::new();
    feed.set(data.len(), true, None);
    let mut streamed = Vec::new();
    let streamed_result = load_streaming(
        data,
        &feed,
        &options,
        &mut |k| {
            streamed.push((k.db, k.key.to_vec()));
            Ok(())
        },
        &mut |_, _, _| {},
    );
    [(whole, whole_result), (streamed, streamed_result)]
}

#[test]
fn a_streamed_load_of_many_keys_matches_the_whole_load_summary_included() {
    let data = many();
    let [(whole, w), (streamed, s)] = both_loads(&data);
    let w = w.expect("a valid file");
    assert!(w.expired_skipped > 0 && w.keys > 2000);
    assert_eq!(s.expect("a valid file"), w);
    assert_eq!(streamed, whole);
}

#[test]
fn a_streamed_load_of_a_damaged_file_fails_where_the_whole_load_does() {
    let data = many();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for round in 0..300 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut damaged = data.clone();
        let at = 9 + (rng as usize) % (data.len() - 9);
        damaged[at] ^= 1 << ((rng >> 40) % 8);
        let [(whole, w), (streamed, s)] = both_loads(&damaged);
        match (w, s) {
            (Ok(w), Ok(s)) => {
                assert_eq!(s, w, "round {round}, byte {at}");
                assert_eq!(streamed, whole);
            }
            (Err(w), Err(s)) => {
                assert_eq!(
                    (s.kind, s.offset, &s.key),
                    (w.kind, w.offset, &w.key),
                    "round {round}, byte {at}: {s} / {w}"
                );
                // The keys before the damage reach the sink either way.
                assert_eq!(streamed, whole, "round {round}, byte {at}");
            }
            (w, s) => panic!("round {round}, byte {at}: whole {w:?}, streamed {s:?}"),
        }
    }
}
