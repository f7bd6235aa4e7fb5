//! Ziplist: the compact encoding Redis used before listpacks (up to 6.2)
//! for small hashes, sorted sets and lists (inside quicklist nodes). Redis 7
//! still loads it from older RDB files (and converts it to a listpack), so
//! this module only decodes it.
//!
//! Layout: zlbytes u32 LE (the whole size), zltail u32 LE (offset of the
//! last entry), zllen u16 LE (element count, 65535 = unknown), the entries,
//! and a 0xFF terminator. An entry is: the previous entry's size (one byte
//! below 254, else 0xFE and a u32 LE), an encoding (strings: 1, 2 or 5
//! bytes giving the length; integers: one byte giving the width, or the
//! value itself for 0..=12), and the data.

use super::{EncodingError, Item};

/// zlbytes (u32) + zltail (u32) + zllen (u16).
const HEADER_BYTES: usize = 10;
/// The element-count value that means "too many to count in 16 bits".
const COUNT_UNKNOWN: u16 = u16::MAX;
/// The terminator byte.
const END: u8 = 0xFF;
/// A first prevlen byte of this value announces a 4-byte prevlen.
const BIG_PREVLEN: u8 = 0xFE;

/// Checks the header and terminator of `zl` and returns an iterator over its
/// elements; the entries, the tail offset and the count are checked as the
/// iterator goes (see [`Entries`]).
pub fn entries(zl: &[u8]) -> Result<Entries<'_>, EncodingError> {
    if zl.len() < HEADER_BYTES + 1 {
        return Err(EncodingError::new(format!(
            "ziplist of {} bytes is shorter than its 11-byte minimum",
            zl.len()
        )));
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]);
    if usize::try_from(total).ok() != Some(zl.len()) {
        return Err(EncodingError::new(format!(
            "ziplist header says {} bytes at offset 0, but it has {}",
            total,
            zl.len()
        )));
    }
    let end = zl.len() - 1;
    if zl[end] != END {
        return Err(EncodingError::new(format!(
            "ziplist does not end with the 0xFF terminator at offset {end}"
        )));
    }
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]);
    let tail = match usize::try_from(tail) {
        Ok(t) if (HEADER_BYTES..=end).contains(&t) => t,
        _ => {
            return Err(EncodingError::new(format!(
                "ziplist tail offset {tail} at offset 4 is outside its entries \
                 ({HEADER_BYTES}..={end})"
            )))
        }
    };
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    Ok(Entries {
        zl,
        tail,
        pos: HEADER_BYTES,
        prev_size: 0,
        last_entry: None,
        seen: 0,
        header_count: (count != COUNT_UNKNOWN).then_some(usize::from(count)),
        done: false,
    })
}

/// Iterator over the elements of a ziplist (see [`entries`]). Every entry is
/// bounds-checked and its prevlen compared with the previous entry's size;
/// at the terminator the tail offset must point at the last entry (at the
/// terminator if there is none) and the header count (unless 65535) must
/// match. The first error is yielded once and the iterator then ends.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    zl: &'a [u8],
    /// The header's zltail.
    tail: usize,
    /// Offset of the next entry (or of the terminator).
    pos: usize,
    /// Size of the previous entry (what the next prevlen must say).
    prev_size: usize,
    /// Offset of the last entry decoded.
    last_entry: Option<usize>,
    seen: usize,
    header_count: Option<usize>,
    done: bool,
}

impl Entries<'_> {
    /// The element count stored in the header, or None when the header says
    /// 65535 ("unknown").
    pub fn header_count(&self) -> Option<usize> {
        self.header_count
    }

    /// The checks made at the terminator (offset `self.pos`).
    fn finish(&self) -> Result<(), EncodingError> {
        let end = self.zl.len() - 1;
        if self.pos != end {
            return Err(EncodingError::new(format!(
                "ziplist terminator at offset {} before its end at offset {end}",
                self.pos
            )));
        }
        let expected_tail = self.last_entry.unwrap_or(end);
        if self.tail != expected_tail {
            return Err(EncodingError::new(format!(
                "ziplist tail offset {} (at offset 4) does not point at its last entry \
                 at offset {expected_tail}",
                self.tail
            )));
        }
        match self.header_count {
            Some(n) if n != self.seen => Err(EncodingError::new(format!(
                "ziplist header counts {n} elements at offset 8, but it has {}",
                self.seen
            ))),
            _ => Ok(()),
        }
    }
}

/// Decodes the entry at `pos` (before the terminator at `zl.len() - 1`),
/// whose prevlen must be `prev_size`; returns the element and the entry's
/// size.
fn decode_at(zl: &[u8], pos: usize, prev_size: usize) -> Result<(Item<'_>, usize), EncodingError> {
    // Every part of an entry must lie before the terminator.
    let limit = zl.len() - 1;
    let overrun = || {
        EncodingError::new(format!(
            "ziplist entry at offset {pos} overruns the ziplist"
        ))
    };
    let header = |from: usize, n: usize| -> Result<&[u8], EncodingError> {
        match from.checked_add(n) {
            Some(to) if to <= limit => Ok(&zl[from..to]),
            _ => Err(overrun()),
        }
    };
    let (prevlen, prevlen_bytes) = if zl[pos] == BIG_PREVLEN {
        let b = header(pos + 1, 4)?;
        (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 5)
    } else {
        (usize::from(zl[pos]), 1)
    };
    if prevlen != prev_size {
        return Err(EncodingError::new(format!(
            "ziplist entry at offset {pos} says the previous entry has {prevlen} bytes, \
             but it has {prev_size}"
        )));
    }
    let enc_at = pos + prevlen_bytes;
    let enc = header(enc_at, 1)?[0];
    // (encoding bytes, data bytes)
    let (enc_bytes, data_len): (usize, usize) = match enc {
        0x00..=0x3F => (1, usize::from(enc & 0x3F)),
        0x40..=0x7F => {
            let b = header(enc_at + 1, 1)?;
            (2, (usize::from(enc & 0x3F) << 8) | usize::from(b[0]))
        }
        0x80..=0xBF => {
            let b = header(enc_at + 1, 4)?;
            let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            (5, usize::try_from(len).map_err(|_| overrun())?)
        }
        0xC0 => (1, 2),
        0xD0 => (1, 4),
        0xE0 => (1, 8),
        0xF0 => (1, 3),
        0xFE => (1, 1),
        0xF1..=0xFD => (1, 0),
        _ => {
            return Err(EncodingError::new(format!(
                "ziplist entry at offset {pos} has invalid encoding byte 0x{enc:02x} \
                 at offset {enc_at}"
            )))
        }
    };
    let data_at = enc_at + enc_bytes;
    let data = header(data_at, data_len)?;
    let item = match enc {
        0x00..=0xBF => Item::Str(data),
        0xC0 => Item::Int(i64::from(i16::from_le_bytes([data[0], data[1]]))),
        0xD0 => Item::Int(i64::from(i32::from_le_bytes([
            data[0], data[1], data[2], data[3],
        ]))),
        0xE0 => {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(data);
            Item::Int(i64::from_le_bytes(raw))
        }
        // Sign-extend 24 bits by placing them in the top of an i32.
        0xF0 => Item::Int(i64::from(
            i32::from_le_bytes([0, data[0], data[1], data[2]]) >> 8,
        )),
        0xFE => Item::Int(i64::from(data[0] as i8)),
        // Immediate: the low 4 bits hold value + 1 (1..=13).
        _ => Item::Int(i64::from(enc & 0x0F) - 1),
    };
    // `header` checked data_at + data_len <= limit, so this cannot overflow.
    Ok((item, data_at + data_len - pos))
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Item<'a>, EncodingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.zl[self.pos] == END {
            self.done = true;
            return self.finish().err().map(Err);
        }
        match decode_at(self.zl, self.pos, self.prev_size) {
            Ok((item, size)) => {
                self.last_entry = Some(self.pos);
                self.prev_size = size;
                self.pos += size;
                self.seen += 1;
                Some(Ok(item))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::QuickCheck;

    fn items(zl: &[u8]) -> Vec<Item<'_>> {
        entries(zl)
            .expect("valid header")
            .collect::<Result<Vec<_>, _>>()
            .expect("valid entries")
    }

    fn first_error(zl: &[u8]) -> String {
        match entries(zl) {
            Err(e) => e.0,
            Ok(it) => it
                .filter_map(Result::err)
                .next()
                .map(|e| e.0)
                .unwrap_or_default(),
        }
    }

    /// Ziplists written by real Redis, from Redis's own test fixtures
    /// (tests/assets/*.rdb of the 7.0.15 tree, which Redis 7 must load).
    #[test]
    fn decodes_ziplists_written_by_redis() {
        // hash-ziplist.rdb, key "hash": f1 v1 f2 v2 (6-bit strings).
        let zl = b"\x1b\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x02f1\x04\x02v1\x04\x02f2\x04\
                   \x02v2\xff";
        assert_eq!(
            items(zl),
            vec![
                Item::Str(b"f1"),
                Item::Str(b"v1"),
                Item::Str(b"f2"),
                Item::Str(b"v2")
            ]
        );
        // zset-ziplist.rdb, key "zset": one 1 two 2 (4-bit immediates).
        let zl = b"\x19\x00\x00\x00\x16\x00\x00\x00\x04\x00\x00\x03one\x05\xf2\x02\x03two\x05\
                   \xf3\xff";
        assert_eq!(
            items(zl),
            vec![
                Item::Str(b"one"),
                Item::Int(1),
                Item::Str(b"two"),
                Item::Int(2)
            ]
        );
        // list-quicklist.rdb (Redis 4.0.9), key "list": one node holding 7.
        let zl = b"\x0d\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x00\xf8\xff";
        assert_eq!(items(zl), vec![Item::Int(7)]);
        // encodings.rdb (RDB 4), key "list_zipped": int16, strings, int32,
        // int64.
        let zl = b"0\x00\x00\x00%\x00\x00\x00\x08\x00\x00\xc0\x01\x00\x04\xc0\x02\x00\x04\xc0\
                   \x03\x00\x04\x01a\x03\x01b\x03\x01c\x03\xd0\xa0\x86\x01\x00\x06\xe0\x00\xbc\
                   \xa0e\x01\x00\x00\x00\xff";
        assert_eq!(
            items(zl),
            vec![
                Item::Int(1),
                Item::Int(2),
                Item::Int(3),
                Item::Str(b"a"),
                Item::Str(b"b"),
                Item::Str(b"c"),
                Item::Int(100_000),
                Item::Int(6_000_000_000),
            ]
        );
        // encodings.rdb, key "hash_zipped": a 1 b 2 c 3.
        let zl = b" \x00\x00\x00\x1b\x00\x00\x00\x06\x00\x00\x01a\x03\xc0\x01\x00\x04\x01b\x03\
                   \xc0\x02\x00\x04\x01c\x03\xc0\x03\x00\xff";
        assert_eq!(items(zl).len(), 6);
        assert_eq!(items(zl)[5], Item::Int(3));
    }

    #[test]
    fn decodes_the_example_in_ziplist_c() {
        // The layout comment of ziplist.c: "2" and "5" as immediates.
        let zl = b"\x0f\x00\x00\x00\x0c\x00\x00\x00\x02\x00\x00\xf3\x02\xf6\xff";
        assert_eq!(items(zl), vec![Item::Int(2), Item::Int(5)]);
        assert_eq!(entries(zl).unwrap().header_count(), Some(2));
    }

    /// Builds a ziplist from entry bodies (encoding + data), following the
    /// layout documented at the top of ziplist.c: each entry is prefixed by
    /// the previous entry's total size (1 byte if < 254, else 0xFE + u32 LE;
    /// 0 for the first), zltail is the offset of the last entry (10 when
    /// empty), zllen the count (65535 if it does not fit).
    fn build(bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut zl = vec![0u8; HEADER_BYTES];
        let mut prev = 0usize;
        let mut tail = HEADER_BYTES;
        for body in bodies {
            tail = zl.len();
            let start = zl.len();
            if prev < 254 {
                zl.push(prev as u8);
            } else {
                zl.push(0xfe);
                zl.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            zl.extend_from_slice(body);
            prev = zl.len() - start;
        }
        zl.push(0xff);
        let total = zl.len() as u32;
        zl[..4].copy_from_slice(&total.to_le_bytes());
        zl[4..8].copy_from_slice(&(tail as u32).to_le_bytes());
        let count = u16::try_from(bodies.len()).unwrap_or(u16::MAX);
        zl[8..10].copy_from_slice(&count.to_le_bytes());
        zl
    }

    /// Every encoding of ziplist.c (zipStoreEntryEncoding / zipSaveInteger):
    /// 6-bit, 14-bit (big-endian) and 32-bit (big-endian) string lengths,
    /// int16/32/64 and int24 (little-endian), int8, immediates 0..=12.
    fn every_encoding() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let s63 = vec![b'a'; 63];
        let s64 = vec![b'b'; 64];
        let s16383 = vec![b'c'; 16383];
        let s16384 = vec![b'd'; 16384];
        let bodies = vec![
            [&[0x3f][..], &s63].concat(),
            [&[0x40, 0x40][..], &s64].concat(),
            [&[0x7f, 0xff][..], &s16383].concat(),
            [&[0x80, 0x00, 0x00, 0x40, 0x00][..], &s16384].concat(),
            vec![0x00],
            vec![0xf1],
            vec![0xfd],
            vec![0xfe, 0x80],
            vec![0xfe, 0x7f],
            vec![0xf0, 0x00, 0x00, 0x80],
            vec![0xf0, 0xff, 0xff, 0x7f],
            vec![0xc0, 0x00, 0x80],
            vec![0xd0, 0xff, 0xff, 0xff, 0x7f],
            vec![0xe0, 0, 0, 0, 0, 0, 0, 0, 0x80],
        ];
        (bodies, vec![s63, s64, s16383, s16384])
    }

    #[test]
    fn decodes_every_encoding_and_long_prevlens() {
        let (bodies, strings) = every_encoding();
        let zl = build(&bodies);
        // The entries after the 64-, 16383- and 16384-byte strings carry
        // 5-byte prevlens.
        assert_eq!(
            items(&zl),
            vec![
                Item::Str(&strings[0]),
                Item::Str(&strings[1]),
                Item::Str(&strings[2]),
                Item::Str(&strings[3]),
                Item::Str(b""),
                Item::Int(0),
                Item::Int(12),
                Item::Int(-128),
                Item::Int(127),
                Item::Int(-8_388_608),
                Item::Int(8_388_607),
                Item::Int(-32768),
                Item::Int(i64::from(i32::MAX)),
                Item::Int(i64::MIN),
            ]
        );
    }

    #[test]
    fn five_byte_prevlen_with_a_small_value_is_accepted() {
        // Redis keeps a 5-byte prevlen field when the previous entry shrinks
        // (no cascade shrinking), so a small value may sit in 5 bytes.
        let zl = b"\x13\x00\x00\x00\x0c\x00\x00\x00\x02\x00\x00\xf2\xfe\x02\x00\x00\x00\xf3\xff";
        assert_eq!(items(zl), vec![Item::Int(1), Item::Int(2)]);
    }

    #[test]
    fn empty_ziplist_and_unknown_count() {
        let zl = build(&[]);
        assert_eq!(zl, b"\x0b\x00\x00\x00\x0a\x00\x00\x00\x00\x00\xff");
        assert_eq!(items(&zl), vec![]);
        let mut zl = build(&[vec![0xf1], vec![0xf2]]);
        zl[8] = 0xff;
        zl[9] = 0xff;
        assert_eq!(entries(&zl).unwrap().header_count(), None);
        assert_eq!(items(&zl), vec![Item::Int(0), Item::Int(1)]);
    }

    #[test]
    fn malformed_ziplists_are_rejected_with_the_offset() {
        // 3 entries at offsets 10 ("ab"), 14 (imm 5), 16 (int16 300).
        let good = build(&[b"\x02ab".to_vec(), vec![0xf6], vec![0xc0, 0x2c, 0x01]]);
        assert_eq!(items(&good).len(), 3);
        let with = |at: usize, b: u8| {
            let mut zl = good.clone();
            zl[at] = b;
            first_error(&zl)
        };
        assert!(first_error(&good[..10]).contains("shorter"));
        assert!(with(0, 0).contains("header says 0 bytes"));
        assert!(with(good.len() - 1, 0).contains("0xFF terminator"));
        assert!(with(4, 200).contains("tail offset 200"));
        assert_eq!(
            with(4, 14),
            "ziplist tail offset 14 (at offset 4) does not point at its last entry at offset 16"
        );
        assert_eq!(
            with(8, 2),
            "ziplist header counts 2 elements at offset 8, but it has 3"
        );
        assert_eq!(
            with(14, 3),
            "ziplist entry at offset 14 says the previous entry has 3 bytes, but it has 4"
        );
        assert_eq!(
            with(15, 0xc1),
            "ziplist entry at offset 14 has invalid encoding byte 0xc1 at offset 15"
        );
        assert_eq!(
            with(11, 0x3f),
            "ziplist entry at offset 10 overruns the ziplist"
        );
        assert!(with(16, 0xff).contains("terminator at offset 16 before its end"));
        // First entry with a non-zero prevlen.
        assert!(with(10, 1).contains("offset 10 says the previous entry has 1 bytes"));
        // Empty ziplist whose tail does not point at the terminator.
        let mut zl = build(&[]);
        zl[4] = 0;
        assert!(first_error(&zl).contains("tail offset 0"));
    }

    #[test]
    fn huge_declared_lengths_fail_fast() {
        // A 32-bit string length of 4 GiB, and a 5-byte prevlen, in tiny
        // ziplists.
        let zl = b"\x11\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x00\x80\xff\xff\xff\xff\xff";
        assert_eq!(
            first_error(zl),
            "ziplist entry at offset 10 overruns the ziplist"
        );
        let zl = b"\x0d\x00\x00\x00\x0a\x00\x00\x00\x01\x00\xfe\xff\xff";
        assert_eq!(
            first_error(zl),
            "ziplist entry at offset 10 overruns the ziplist"
        );
    }

    fn walk(zl: &[u8]) -> usize {
        match entries(zl) {
            Ok(it) => it.take_while(Result::is_ok).count(),
            Err(_) => 0,
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        fn prop(bytes: Vec<u8>, fix_header: bool) -> bool {
            let mut zl = bytes;
            if fix_header && zl.len() >= 11 {
                let n = zl.len() as u32;
                zl[..4].copy_from_slice(&n.to_le_bytes());
                zl[4..8].copy_from_slice(&10u32.to_le_bytes());
                *zl.last_mut().unwrap() = 0xff;
            }
            walk(&zl);
            true
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }

    #[test]
    fn truncated_and_bit_flipped_ziplists_never_panic() {
        fn prop(cut: usize, flips: Vec<(usize, u8)>) -> bool {
            let (bodies, _) = every_encoding();
            let small: Vec<Vec<u8>> = bodies.into_iter().filter(|b| b.len() < 100).collect();
            let good = build(&small);
            let cut = cut % good.len();
            let mut short = good[..cut].to_vec();
            walk(&short);
            if short.len() >= 11 {
                let n = short.len() as u32;
                short[..4].copy_from_slice(&n.to_le_bytes());
                *short.last_mut().unwrap() = 0xff;
                walk(&short);
            }
            // Bit flips (the size field is left alone half the time so that
            // the flips reach the entries).
            let mut flipped = good.clone();
            for (at, mask) in flips {
                let at = at % flipped.len();
                if at >= 4 || mask & 1 == 0 {
                    flipped[at] ^= mask;
                }
            }
            walk(&flipped);
            true
        }
        QuickCheck::new()
            .tests(1000)
            .quickcheck(prop as fn(usize, Vec<(usize, u8)>) -> bool);
    }
}
