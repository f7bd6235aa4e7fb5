//! Hand-made RDB files shared by the persistence tests (the loader's
//! damage tests) and the inspector's agreement test: small builders,
//! hostile files with absurd lengths, files every loader must refuse.

use hozon::rdb::listpack;
use hozon::rdb::reader::ErrorKind;

/// An RDB length in its 64-bit form.
pub fn len64(n: u64) -> Vec<u8> {
    let mut out = vec![0x81];
    out.extend_from_slice(&n.to_be_bytes());
    out
}

/// A short RDB length (< 64).
pub fn len6(n: u8) -> Vec<u8> {
    assert!(n < 64, "a 6-bit length");
    vec![n]
}

pub fn string(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    hozon::rdb::writer::put_len(&mut out, s.len() as u64);
    out.extend_from_slice(s);
    out
}

/// `REDIS0010`, the body, EOF and a correct CRC: only the body is wrong.
pub fn rdb_file(body: &[u8]) -> Vec<u8> {
    let mut out = b"REDIS0010".to_vec();
    out.extend_from_slice(body);
    out.push(0xFF);
    let crc = hozon::rdb::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A key record: type byte, key `k`, then `value`.
pub fn record(value_type: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![value_type];
    out.extend(string(b"k"));
    out.extend_from_slice(value);
    out
}

pub fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// A stream body with no nodes, no entries, zero IDs and counters, ending
/// just before the group count.
pub fn empty_stream_head() -> Vec<u8> {
    // nodes 0; length 0; last ID 0-0; first 0-0; max deleted 0-0; added 0
    vec![0; 9]
}

/// Hostile files: (what, file, whether it must load).
pub fn hostile_files() -> Vec<(&'static str, Vec<u8>, bool)> {
    let huge = 1u64 << 60;
    let tail = b"abcdefgh".as_slice();
    let mut files = vec![
        (
            "string length 2^32",
            rdb_file(&record(0, &cat(&[&len64(1 << 32), tail]))),
            false,
        ),
        (
            "string length 2^32-1 (32-bit form)",
            rdb_file(&record(0, &cat(&[&[0x80, 0xff, 0xff, 0xff, 0xff], tail]))),
            false,
        ),
        (
            "key length 2^62",
            rdb_file(&cat(&[&[0], &len64(1 << 62), tail])),
            false,
        ),
        (
            "list of 2^60 elements",
            rdb_file(&record(1, &cat(&[&len64(huge), &string(b"a")]))),
            false,
        ),
        (
            "set of 2^60 members",
            rdb_file(&record(2, &cat(&[&len64(huge), &string(b"a")]))),
            false,
        ),
        (
            "zset (string scores) of 2^60 members",
            rdb_file(&record(3, &cat(&[&len64(huge), &string(b"a"), b"\x011"]))),
            false,
        ),
        (
            "hash of 2^60 fields",
            rdb_file(&record(
                4,
                &cat(&[&len64(huge), &string(b"a"), &string(b"b")]),
            )),
            false,
        ),
        (
            "zset of 2^60 members",
            rdb_file(&record(5, &cat(&[&len64(huge), &string(b"a"), &[0; 8]]))),
            false,
        ),
        (
            "quicklist of 2^60 nodes",
            rdb_file(&record(14, &cat(&[&len64(huge), &string(b"a")]))),
            false,
        ),
        (
            "quicklist 2 of 2^60 nodes",
            rdb_file(&record(18, &cat(&[&len64(huge), &[2], &string(b"a")]))),
            false,
        ),
        (
            "hash with field TTLs of 2^60 fields",
            rdb_file(&record(24, &cat(&[&[0; 8], &len64(huge), &[0]]))),
            false,
        ),
        (
            "LZF string claiming 2^40 bytes",
            rdb_file(&record(
                0,
                &cat(&[&[0xC3, 4], &len64(1 << 40), b"\x01ab\x00"]),
            )),
            false,
        ),
        (
            "LZF string claiming 2^32-1 bytes (32-bit form)",
            rdb_file(&record(
                0,
                &cat(&[&[0xC3, 4, 0x80, 0xff, 0xff, 0xff, 0xff], b"\x01ab\x00"]),
            )),
            false,
        ),
        (
            "LZF string with compressed length 2^40",
            rdb_file(&record(
                0,
                &cat(&[&[0xC3], &len64(1 << 40), &len6(10), tail]),
            )),
            false,
        ),
        (
            "LZF data shorter than it claims",
            rdb_file(&record(0, &cat(&[&[0xC3, 2, 0x40, 200], b"\x00a"]))),
            false,
        ),
        (
            "stream of 2^40 nodes",
            rdb_file(&record(19, &cat(&[&len64(1 << 40), &string(&[0; 16])]))),
            false,
        ),
        (
            "stream of 2^40 groups",
            rdb_file(&record(
                19,
                &cat(&[&empty_stream_head(), &len64(1 << 40), tail]),
            )),
            false,
        ),
        (
            "stream group with 2^40 pending entries",
            rdb_file(&record(
                19,
                &cat(&[
                    &empty_stream_head(),
                    &[1],
                    &string(b"g"),
                    &[0, 0, 0],
                    &len64(1 << 40),
                    &[0; 24],
                ]),
            )),
            false,
        ),
        (
            "stream group with 2^40 consumers",
            rdb_file(&record(
                19,
                &cat(&[
                    &empty_stream_head(),
                    &[1],
                    &string(b"g"),
                    &[0, 0, 0, 0],
                    &len64(1 << 40),
                    &string(b"c"),
                ]),
            )),
            false,
        ),
        (
            "stream consumer with 2^40 pending IDs",
            rdb_file(&record(
                19,
                &cat(&[
                    &empty_stream_head(),
                    &[1],
                    &string(b"g"),
                    &[0, 0, 0, 0, 1],
                    &string(b"c"),
                    &[0; 8],
                    &len64(1 << 40),
                    &[0; 16],
                ]),
            )),
            false,
        ),
        (
            "intset claiming 2^31-1 members",
            rdb_file(&record(11, &string(&[8, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f]))),
            false,
        ),
        (
            "intset with encoding 2^31",
            rdb_file(&record(11, &string(&[0, 0, 0, 0x80, 1, 0, 0, 0, 1, 0]))),
            false,
        ),
        (
            "listpack claiming 4 GiB and 65535 elements",
            rdb_file(&record(
                16,
                &string(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            )),
            false,
        ),
        (
            "listpack element claiming 2^32-1 bytes",
            rdb_file(&record(
                16,
                &string(&[12, 0, 0, 0, 2, 0, 0xF0, 0xff, 0xff, 0xff, 0xff, 0xff]),
            )),
            false,
        ),
        (
            "ziplist claiming 4 GiB and 65535 entries",
            rdb_file(&record(
                13,
                &string(&[0xff, 0xff, 0xff, 0xff, 10, 0, 0, 0, 0xff, 0xff, 0xff]),
            )),
            false,
        ),
        (
            "ziplist entry claiming 2^32-1 bytes",
            rdb_file(&record(
                10,
                &string(&[
                    17, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff,
                ]),
            )),
            false,
        ),
        (
            "zipmap value claiming 2^32-1 bytes",
            rdb_file(&record(
                9,
                &string(&[1, 1, b'f', 253, 0xff, 0xff, 0xff, 0xff, 0, b'v', 0xff]),
            )),
            false,
        ),
        (
            "AUX value of 2^40 bytes",
            rdb_file(&cat(&[&[0xFA], &string(b"x"), &len64(1 << 40), tail])),
            false,
        ),
        (
            "function library of 2^40 bytes",
            rdb_file(&cat(&[&[0xF5], &len64(1 << 40), tail])),
            false,
        ),
        (
            "module AUX string of 2^40 bytes",
            rdb_file(&cat(&[&[0xF7, 1, 2, 5], &len64(1 << 40), tail])),
            false,
        ),
        (
            "SELECTDB 2^60 before a key",
            rdb_file(&cat(&[&[0xFE], &len64(huge), &record(0, &string(b"v"))])),
            false,
        ),
        (
            "RESIZEDB hints of 2^60 (hints only: the file loads)",
            rdb_file(&cat(&[
                &[0xFB],
                &len64(huge),
                &len64(huge),
                &record(0, &string(b"v")),
            ])),
            true,
        ),
    ];
    // Stream nodes whose listpacks lie about their counts.
    let mut lp = listpack::Builder::new();
    for v in [1, 0, 1 << 40, 0] {
        lp.push_int(v);
    }
    files.push((
        "stream node with 2^40 master fields",
        rdb_file(&record(
            19,
            &cat(&[&[1], &string(&[0; 16]), &string(&lp.finish()), &[1, 0, 1]]),
        )),
        false,
    ));
    let mut lp = listpack::Builder::new();
    for v in [1, 0, 0, 0, 0, 0, 0, 1 << 40] {
        lp.push_int(v);
    }
    files.push((
        "stream entry with 2^40 fields",
        rdb_file(&record(
            19,
            &cat(&[&[1], &string(&[0; 16]), &string(&lp.finish()), &[1, 0, 1]]),
        )),
        false,
    ));
    files
}

/// Files every loader must refuse, with the kind of error.
pub fn refused_files() -> Vec<(&'static str, Vec<u8>, ErrorKind)> {
    let good = rdb_file(&record(0, &string(b"v")));
    let mut v13 = good.clone();
    v13[..9].copy_from_slice(b"REDIS0013");
    let mut valkey81 = b"VALKEY081".to_vec();
    valkey81.extend_from_slice(&good[9..]);
    let mut bad_magic = good.clone();
    bad_magic[..5].copy_from_slice(b"REDIX");
    let mut crc_flipped = good.clone();
    let last = crc_flipped.len() - 1;
    crc_flipped[last] ^= 0x10;
    vec![
        (
            "unknown value type 8",
            rdb_file(&record(8, &string(b"v"))),
            ErrorKind::Corrupt,
        ),
        (
            "unknown value type 26",
            rdb_file(&record(26, &string(b"v"))),
            ErrorKind::Corrupt,
        ),
        (
            "unknown value type 243",
            rdb_file(&record(243, &string(b"v"))),
            ErrorKind::Corrupt,
        ),
        (
            "pre-release function opcode 246",
            rdb_file(&[0xF6, 0]),
            ErrorKind::Unsupported,
        ),
        (
            "pre-release module value type 6",
            rdb_file(&record(6, &[0])),
            ErrorKind::Unsupported,
        ),
        (
            "unknown string encoding",
            rdb_file(&record(0, &[0xC4, 0])),
            ErrorKind::Corrupt,
        ),
        ("version 13", v13, ErrorKind::UnsupportedVersion),
        (
            "version 0",
            cat(&[b"REDIS0000", &good[9..]]),
            ErrorKind::UnsupportedVersion,
        ),
        ("VALKEY081", valkey81, ErrorKind::UnsupportedVersion),
        ("bad magic", bad_magic, ErrorKind::NotRdb),
        (
            "non-digit version",
            cat(&[b"REDIS00x1", &good[9..]]),
            ErrorKind::NotRdb,
        ),
        ("CRC flipped", crc_flipped, ErrorKind::Checksum),
    ]
}
