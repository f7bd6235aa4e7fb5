//! Format 1.2: the replication position in the header.

use super::super::header::{encode_header, read_header};
use super::super::writer::save_keyspace_with_header;
use super::*;
use crate::repl::ids::{Position, ReplId};

fn position(offset: i64, stream_db: u32) -> Position {
    Position {
        replid: ReplId::parse(b"0123456789abcdef0123456789ABCDEF01234567").expect("hex"),
        offset,
        stream_db,
    }
}

/// Saves `ks` in memory with `position` in its header.
fn save_with(ks: &Keyspace, position: Option<Position>) -> (Vec<u8>, Summary) {
    let io = FaultyIo::new();
    let header = HeaderInfo::new(NOW_MS, ks.db_count()).with_position(position);
    let summary = save_keyspace_with_header(
        ks,
        header,
        Arc::new(io.clone()),
        Path::new("/d"),
        "dump.hoz",
        BLOCK_TARGET_BYTES,
    )
    .expect("save");
    let data = io.contents(Path::new("/d/dump.hoz")).expect("file exists");
    (data, summary)
}

fn header_len(data: &[u8]) -> usize {
    le_u32(data, 16) as usize
}

/// Recomputes the header's CRC after an edit.
fn refix(mut d: Vec<u8>) -> Vec<u8> {
    let len = header_len(&d);
    let crc = crc32fast::hash(&d[..len - 4]);
    d[len - 4..len].copy_from_slice(&crc.to_le_bytes());
    d
}

fn trailer_minor(data: &[u8]) -> u16 {
    let at = data.len() - TRAILER_LEN;
    u16::from_le_bytes([data[at + 22], data[at + 23]])
}

/// Where the position fields start in a header written by this build.
fn fields_at() -> usize {
    37 + env!("CARGO_PKG_VERSION").len()
}

#[test]
fn a_position_round_trips_through_every_reader() {
    let ks = random_keyspace(11, 80);
    let expected = dump(&ks, NOW_MS);
    for p in [
        position(0, 0),
        position(123_456_789, 3),
        position(i64::MAX, u32::MAX),
    ] {
        let (data, summary) = save_with(&ks, Some(p));
        assert_eq!(summary.position, Some(p));
        assert_eq!(summary.format_minor, 2);
        assert_eq!(u16::from_le_bytes([data[10], data[11]]), 2, "header minor");
        assert_eq!(trailer_minor(&data), 2);
        assert_eq!(header_len(&data), fields_at() + 1 + 52 + 4);
        let at = fields_at();
        assert_eq!(data[at], 1);
        assert_eq!(&data[at + 1..at + 41], p.replid.as_bytes());
        assert_eq!(le_u32(&data, at + 41 + 8), p.stream_db);

        let loaded = load(&data, &read(2, limits(), NOW_MS)).expect("load");
        assert_loads_as(
            &expected,
            &dump_loaded(&loaded),
            &limits(),
            "with a position",
        );
        let loaded_summary = loaded.summary.expect("summary");
        assert_eq!(loaded_summary.position, Some(p));
        assert_eq!(
            loaded_summary, summary,
            "the writer's summary is the reader's"
        );

        let mut target = Keyspace::new(16);
        let (s, _) = load_into(&data, &mut target, &read(1, limits(), NOW_MS)).expect("into");
        assert_eq!(s.position, Some(p));
        let s = scan_keys(&data, &read(0, limits(), NOW_MS), &mut |_| {
            ControlFlow::Continue(())
        })
        .expect("scan");
        assert_eq!(s.position, Some(p));
        let (salvaged, damages) = load_salvaging(&data, &read(0, limits(), NOW_MS));
        assert!(damages.is_empty(), "{damages:?}");
        assert_eq!(salvaged.summary.expect("summary").position, Some(p));

        // read_summary reads trailer and footer only.
        let footer_only = read_summary(&data).expect("summary");
        assert_eq!(footer_only.position, None);
        assert_eq!(footer_only.format_minor, 2);
        assert_eq!(read_header(&data).expect("header").info.position, Some(p));
    }
}

#[test]
fn without_a_position_the_file_is_1_1_byte_for_byte() {
    // The header exactly as the 1.1 table lays it out.
    let info = HeaderInfo {
        created_ms: NOW_MS,
        databases: 16,
        engine_version: "0.1.0".into(),
        position: None,
        functions: Vec::new(),
        key_access: Default::default(),
    };
    let mut expected = Vec::new();
    expected.extend_from_slice(&MAGIC);
    expected.extend_from_slice(&1u16.to_le_bytes());
    expected.extend_from_slice(&1u16.to_le_bytes());
    expected.extend_from_slice(&3u32.to_le_bytes());
    expected.extend_from_slice(&46u32.to_le_bytes());
    expected.extend_from_slice(&NOW_MS.to_le_bytes());
    expected.extend_from_slice(&16u32.to_le_bytes());
    expected.extend_from_slice(&0x00ab_cdefu32.to_le_bytes());
    expected.push(5);
    expected.extend_from_slice(b"0.1.0");
    let crc = crc32fast::hash(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(encode_header(&info, 0x00ab_cdef), expected);
    // With a position, only the minor version, the length, the fields and
    // the CRC change.
    let with = encode_header(
        &info.clone().with_position(Some(position(7, 1))),
        0x00ab_cdef,
    );
    assert_eq!(with.len(), 46 + 53);
    assert_eq!(with[..10], expected[..10]);
    assert_eq!(u16::from_le_bytes([with[10], with[11]]), 2);
    assert_eq!(with[12..16], expected[12..16]);
    assert_eq!(with[20..42], expected[20..42]);

    // A whole file written without a position: 1.1 in header and trailer,
    // and no position from any reader.
    let ks = random_keyspace(12, 40);
    let (data, summary) = save_with(&ks, None);
    let (_, plain, plain_summary) = save_mem(&ks, BLOCK_TARGET_BYTES);
    for (data, summary) in [(&data, &summary), (&plain, &plain_summary)] {
        assert_eq!(u16::from_le_bytes([data[10], data[11]]), 1);
        assert_eq!(trailer_minor(data), 1);
        assert_eq!(header_len(data), fields_at() + 4);
        assert_eq!(summary.format_minor, 1);
        assert_eq!(summary.position, None);
        let loaded = load(data, &read(0, limits(), NOW_MS)).expect("load");
        assert_eq!(loaded.summary.expect("summary").position, None);
    }
    // The two differ only by their random file ids (header bytes 32..36,
    // block header bytes 5..8, and the CRCs over them): same length, and
    // same bytes once those are masked.
    assert_eq!(data.len(), plain.len());
    let mask = |d: &[u8]| {
        let mut d = d.to_vec();
        d[32..36].fill(0);
        let len = header_len(&d);
        d[len - 4..len].fill(0);
        for b in &summary.blocks {
            let at = b.offset as usize;
            d[at + 5..at + 8].fill(0);
            d[at + 36..at + 40].fill(0);
        }
        d
    };
    assert_eq!(mask(&data), mask(&plain));
}

#[test]
fn a_damaged_position_is_header_damage() {
    let ks = random_keyspace(13, 30);
    let expected = dump(&ks, NOW_MS);
    let (data, _) = save_with(&ks, Some(position(99, 2)));
    let at = fields_at();
    let mut cases: Vec<(&str, Vec<u8>, usize, &str)> = Vec::new();
    let mut presence = data.clone();
    presence[at] = 2;
    cases.push(("presence", refix(presence), at, "presence byte 2"));
    let mut id = data.clone();
    id[at + 1 + 17] = b'g';
    cases.push(("id", refix(id), at + 1, "not 40 hexadecimal digits"));
    let mut negative = data.clone();
    negative[at + 41..at + 49].copy_from_slice(&(-5i64).to_le_bytes());
    cases.push((
        "offset",
        refix(negative),
        at + 41,
        "negative replication offset -5",
    ));
    for (what, bad, offset, detail) in cases {
        let err = load(&bad, &read(0, limits(), NOW_MS)).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Header { offset: o, detail: d }
                if *o == offset as u64 && d.contains(detail)),
            "{what}: {err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("snapshot header damaged at offset"),
            "{err}"
        );
        // Salvage still recovers every key, without the position.
        let (loaded, damages) = load_salvaging(&bad, &read(0, limits(), NOW_MS));
        assert_eq!(damages.len(), 1, "{what}: {damages:?}");
        assert_eq!(damages[0].keys_lost, Some(0));
        assert_loads_as(&expected, &dump_loaded(&loaded), &limits(), what);
        assert_eq!(loaded.summary.expect("index usable").position, None);
    }

    // Truncated fields: headers whose position runs past the CRC.
    let info = HeaderInfo::new(NOW_MS, 16).with_position(Some(position(1, 0)));
    let full = encode_header(&info, 5);
    let body = &full[..full.len() - 4];
    for keep in [at, at + 1, at + 20, at + 41, at + 52] {
        let mut h = body[..keep].to_vec();
        let len = (h.len() + 4) as u32;
        h[16..20].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&h);
        h.extend_from_slice(&crc.to_le_bytes());
        let err = read_header(&h).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::Header { detail, .. } if detail.contains("runs past the header")),
            "{keep}: {err:?}"
        );
    }
}

#[test]
fn readers_skip_what_they_do_not_know_after_the_known_fields() {
    let ks = random_keyspace(14, 30);
    let expected = dump(&ks, NOW_MS);
    let p = position(4242, 5);
    let (data, _) = save_with(&ks, Some(p));
    // A reader before 1.2 takes the position fields for unknown trailing
    // header bytes: the same file labelled 1.1 takes that path here, and
    // loads every key without a position.
    let mut old = data.clone();
    old[10..12].copy_from_slice(&1u16.to_le_bytes());
    let old = refix(old);
    let loaded = load(&old, &read(0, limits(), NOW_MS)).expect("load as 1.1");
    assert_loads_as(&expected, &dump_loaded(&loaded), &limits(), "as 1.1");
    assert_eq!(loaded.summary.expect("summary").position, None);
    // A later minor version (which keeps 1.2's fields) loads with them.
    let mut newer = data.clone();
    newer[10..12].copy_from_slice(&9u16.to_le_bytes());
    let loaded = load(&refix(newer), &read(0, limits(), NOW_MS)).expect("load as 1.9");
    assert_eq!(loaded.summary.expect("summary").position, Some(p));
    // Bytes after the position (a later version's fields) are skipped.
    let info = HeaderInfo::new(NOW_MS, 16).with_position(Some(p));
    let full = encode_header(&info, 5);
    let mut h = full[..full.len() - 4].to_vec();
    h.extend_from_slice(b"later fields");
    h[10..12].copy_from_slice(&3u16.to_le_bytes());
    let len = (h.len() + 4) as u32;
    h[16..20].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    let header = read_header(&h).expect("header");
    assert_eq!(header.info.position, Some(p));
    assert_eq!(header.len, h.len());
    // A 1.2 header that says "no position".
    let mut h = full[..fields_at()].to_vec();
    h.push(0);
    let len = (h.len() + 4) as u32;
    h[16..20].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(read_header(&h).expect("header").info.position, None);
}
