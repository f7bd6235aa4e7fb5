//! Listpack: Redis 7's compact sequence of strings and integers, used for
//! small hashes, sorted sets and lists (inside quicklist nodes) and for the
//! nodes of streams.
//!
//! Layout: a 6-byte header (total bytes u32 LE, element count u16 LE, where
//! 65535 means "unknown, count them"), the entries, and a 0xFF terminator.
//! An entry is an encoding byte (possibly followed by length bytes), the
//! data, and a "backlen": the size of encoding+data written in 7-bit groups
//! so that the listpack can be walked backwards.

use super::{EncodingError, Item};
use crate::types::num::parse_i64;

/// Size of the listpack header: total bytes (u32) + element count (u16).
const HEADER_BYTES: usize = 6;
/// The element-count value that means "too many to count in 16 bits".
const COUNT_UNKNOWN: u16 = u16::MAX;
/// The terminator byte (never a valid encoding byte).
const EOF: u8 = 0xFF;

/// Checks the header and the terminator of `lp` and returns an iterator
/// over its elements. The entries themselves are checked as the iterator
/// reaches them, so a caller that stops early has not validated the rest
/// (use [`validate`] for that).
pub fn entries(lp: &[u8]) -> Result<Entries<'_>, EncodingError> {
    if lp.len() < HEADER_BYTES + 1 {
        return Err(EncodingError::new(format!(
            "listpack of {} bytes is shorter than its 7-byte minimum",
            lp.len()
        )));
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]);
    if usize::try_from(total).ok() != Some(lp.len()) {
        return Err(EncodingError::new(format!(
            "listpack header says {} bytes at offset 0, but it has {}",
            total,
            lp.len()
        )));
    }
    if lp[lp.len() - 1] != EOF {
        return Err(EncodingError::new(format!(
            "listpack does not end with the 0xFF terminator at offset {}",
            lp.len() - 1
        )));
    }
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    Ok(Entries {
        lp,
        pos: HEADER_BYTES,
        seen: 0,
        header_count: (count != COUNT_UNKNOWN).then_some(usize::from(count)),
        done: false,
    })
}

/// Walks the whole listpack, checking every entry and the element count,
/// and returns the number of elements.
pub fn validate(lp: &[u8]) -> Result<usize, EncodingError> {
    let mut n = 0usize;
    for item in entries(lp)? {
        item?;
        n += 1;
    }
    Ok(n)
}

/// Iterator over the elements of a listpack (see [`entries`]). Each entry is
/// bounds-checked, including its backlen; the first error is yielded once
/// and the iterator then ends. After the last entry the count in the header
/// (unless 65535) is compared with the number of entries seen.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    lp: &'a [u8],
    /// Offset of the next entry (or of the terminator).
    pos: usize,
    /// Entries decoded so far.
    seen: usize,
    header_count: Option<usize>,
    done: bool,
}

impl Entries<'_> {
    /// The element count stored in the header, or None when the header says
    /// 65535 ("unknown": the listpack has 65535 elements or more).
    pub fn header_count(&self) -> Option<usize> {
        self.header_count
    }
}

/// Decodes the entry at offset `pos` of `lp`, returning it and the offset of
/// the following entry. The caller has checked the header and terminator and
/// that `pos` is before the terminator's offset.
fn decode_at(lp: &[u8], pos: usize) -> Result<(Item<'_>, usize), EncodingError> {
    // Entries must end before the terminator at the last byte.
    let limit = lp.len() - 1;
    let overrun = || {
        EncodingError::new(format!(
            "listpack entry at offset {pos} overruns the listpack"
        ))
    };
    let b = lp[pos];
    // (bytes before the data, data bytes) for strings; for integers the
    // data is read from the same ranges below.
    let (head, data_len): (usize, usize) = match b {
        0x00..=0x7F => (1, 0),
        0x80..=0xBF => (1, usize::from(b & 0x3F)),
        0xC0..=0xDF => (1, 1),
        0xE0..=0xEF => {
            let next = *lp
                .get(pos + 1)
                .filter(|_| pos + 1 < limit)
                .ok_or_else(overrun)?;
            (2, (usize::from(b & 0x0F) << 8) | usize::from(next))
        }
        0xF0 => {
            let len_bytes = lp
                .get(pos + 1..pos + 5)
                .filter(|_| pos + 5 <= limit)
                .ok_or_else(overrun)?;
            let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
            (5, usize::try_from(len).map_err(|_| overrun())?)
        }
        0xF1 => (1, 2),
        0xF2 => (1, 3),
        0xF3 => (1, 4),
        0xF4 => (1, 8),
        _ => {
            return Err(EncodingError::new(format!(
                "listpack entry at offset {pos} has invalid encoding byte 0x{b:02x}"
            )))
        }
    };
    let entry_len = head.checked_add(data_len).ok_or_else(overrun)?;
    let backlen_len = backlen_size(entry_len);
    let data_start = pos + head;
    let data_end = pos.checked_add(entry_len).ok_or_else(overrun)?;
    let end = data_end.checked_add(backlen_len).ok_or_else(overrun)?;
    if end > limit {
        return Err(overrun());
    }
    // A one-byte backlen (entries under 128 bytes) is the entry length.
    let backlen_ok = if backlen_len == 1 {
        usize::from(lp[data_end]) == entry_len
    } else {
        let mut expected = [0u8; 5];
        lp[data_end..end] == *encode_backlen(entry_len, &mut expected)
    };
    if !backlen_ok {
        let what = format!("listpack entry at offset {pos} has a backlen not matching its size");
        return Err(EncodingError::new(format!("{what} {entry_len}")));
    }
    let data = &lp[data_start..data_end];
    let item = match b {
        0x00..=0x7F => Item::Int(i64::from(b)),
        0x80..=0xBF | 0xE0..=0xF0 => Item::Str(data),
        0xC0..=0xDF => {
            // 13-bit two's complement: 5 bits in the encoding byte, 8 after.
            let raw = (i64::from(b & 0x1F) << 8) | i64::from(data[0]);
            Item::Int(if raw >= 1 << 12 { raw - (1 << 13) } else { raw })
        }
        0xF1 => Item::Int(i64::from(i16::from_le_bytes([data[0], data[1]]))),
        0xF2 => {
            // Sign-extend 24 bits by placing them in the top of an i32.
            let v = i32::from_le_bytes([0, data[0], data[1], data[2]]) >> 8;
            Item::Int(i64::from(v))
        }
        0xF3 => Item::Int(i64::from(i32::from_le_bytes([
            data[0], data[1], data[2], data[3],
        ]))),
        _ => {
            let mut v = [0u8; 8];
            v.copy_from_slice(data);
            Item::Int(i64::from_le_bytes(v))
        }
    };
    Ok((item, end))
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Item<'a>, EncodingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let terminator = self.lp.len() - 1;
        if self.lp[self.pos] == EOF {
            self.done = true;
            if self.pos != terminator {
                return Some(Err(EncodingError::new(format!(
                    "listpack terminator at offset {} before its end at offset {}",
                    self.pos, terminator
                ))));
            }
            return match self.header_count {
                Some(n) if n != self.seen => Some(Err(EncodingError::new(format!(
                    "listpack header counts {} elements at offset 4, but it has {}",
                    n, self.seen
                )))),
                _ => None,
            };
        }
        match decode_at(self.lp, self.pos) {
            Ok((item, next)) => {
                self.pos = next;
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

/// Number of bytes the backlen of an entry of `entry_len` bytes takes. The
/// thresholds are Redis's lpEncodeBacklen's (note the strict `<` from two
/// bytes on: 16383 takes three bytes).
fn backlen_size(entry_len: usize) -> usize {
    if entry_len <= 127 {
        1
    } else if entry_len < 16383 {
        2
    } else if entry_len < 2_097_151 {
        3
    } else if entry_len < 268_435_455 {
        4
    } else {
        5
    }
}

/// Writes the backlen of an entry of `entry_len` bytes into `buf` and
/// returns the written part: 7-bit groups, most significant first, every
/// byte but the first with the high bit set (it is read from the end).
fn encode_backlen(entry_len: usize, buf: &mut [u8; 5]) -> &[u8] {
    let n = backlen_size(entry_len);
    let l = entry_len as u64;
    for (i, byte) in buf[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i);
        let group = ((l >> shift) & 0x7F) as u8;
        *byte = if i == 0 {
            (l >> shift) as u8
        } else {
            group | 0x80
        };
    }
    &buf[..n]
}

/// Builds a listpack by appending elements, byte for byte as Redis 7.0's
/// `lpAppend`/`lpAppendInteger` lay them out.
#[derive(Debug, Clone)]
pub struct Builder {
    /// Whatever came before the listpack ([`Builder::append_to`]), then
    /// its header (filled by `finish`) and entries; no terminator yet.
    buf: Vec<u8>,
    /// Where the listpack starts in `buf`.
    start: usize,
    count: usize,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// An empty listpack.
    pub fn new() -> Builder {
        Builder::append_to(Vec::new())
    }

    /// An empty listpack that starts at the end of `buf`: `finish` returns
    /// `buf` with the listpack after what it held, so a caller can reuse
    /// one buffer, or put several listpacks in it.
    pub fn append_to(mut buf: Vec<u8>) -> Builder {
        let start = buf.len();
        buf.extend_from_slice(&[0; HEADER_BYTES]);
        Builder {
            buf,
            start,
            count: 0,
        }
    }

    /// Appends a string element. Like Redis's `lpAppend`, a string that is
    /// the canonical decimal form of an i64 is stored as an integer, in the
    /// smallest integer encoding; other strings take the smallest string
    /// encoding for their length.
    pub fn push_str(&mut self, s: &[u8]) {
        if let Some(v) = parse_i64(s) {
            self.push_int(v);
            return;
        }
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf.push(0xE0 | (len >> 8) as u8);
            self.buf.push(len as u8);
        } else {
            let len32 = u32::try_from(len)
                .expect("listpack string of 4 GiB or more: Redis strings are at most 512 MB");
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&len32.to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.end_entry(start);
    }

    /// Appends an integer element in the smallest integer encoding that
    /// holds it (Redis's `lpEncodeIntegerGetType`).
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            // 13-bit two's complement split over the low 5 bits of the
            // encoding byte and the next byte.
            let u = (v & 0x1FFF) as u16;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if i16::try_from(v).is_ok() {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.end_entry(start);
    }

    /// Number of elements appended so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True if nothing has been appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size in bytes of the listpack `finish` would return now (header,
    /// entries and terminator), i.e. Redis's `lpBytes`.
    pub fn bytes(&self) -> usize {
        self.buf.len() - self.start + 1
    }

    /// The finished listpack: header (total bytes, and the element count or
    /// 65535 when it does not fit below 65535), entries, terminator (after
    /// what the buffer held before, for [`Builder::append_to`]).
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = u32::try_from(self.buf.len() - self.start)
            .expect("listpack of 4 GiB or more: Redis caps listpacks at 1 GB");
        let count = u16::try_from(self.count)
            .ok()
            .filter(|&c| c != COUNT_UNKNOWN)
            .unwrap_or(COUNT_UNKNOWN);
        let header = &mut self.buf[self.start..self.start + HEADER_BYTES];
        header[..4].copy_from_slice(&total.to_le_bytes());
        header[4..].copy_from_slice(&count.to_le_bytes());
        self.buf
    }

    /// Appends the backlen of the entry that starts at `start`.
    fn end_entry(&mut self, start: usize) {
        let entry_len = self.buf.len() - start;
        if entry_len <= 127 {
            // The usual one-byte backlen: the length itself.
            self.buf.push(entry_len as u8);
        } else {
            let mut backlen = [0u8; 5];
            let backlen = encode_backlen(entry_len, &mut backlen);
            self.buf.extend_from_slice(backlen);
        }
        self.count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};

    /// Decodes every element, panicking on an error (test helper).
    fn items(lp: &[u8]) -> Vec<Item<'_>> {
        entries(lp)
            .expect("valid header")
            .collect::<Result<Vec<_>, _>>()
            .expect("valid entries")
    }

    fn build(values: &[&[u8]]) -> Vec<u8> {
        let mut b = Builder::new();
        for v in values {
            b.push_str(v);
        }
        b.finish()
    }

    /// The values of `REDIS_LIST` below, in push order.
    const LIST_VALUES: &[&str] = &[
        "0",
        "127",
        "128",
        "-1",
        "-4096",
        "4095",
        "4096",
        "-4097",
        "32767",
        "-32768",
        "32768",
        "-32769",
        "8388607",
        "-8388608",
        "8388608",
        "-8388609",
        "2147483647",
        "-2147483648",
        "2147483648",
        "-2147483649",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "",
        "01",
        "-0",
        "+1",
    ];

    /// Redis 7.0.15, `RPUSH l` with LIST_VALUES then 63 × "a" and 64 × "b";
    /// the listpack of the single quicklist node in `DUMP l`. It has every
    /// integer encoding on both sides of each boundary and the 6/12-bit
    /// string boundary.
    fn redis_list() -> Vec<u8> {
        let mut lp = Vec::new();
        lp.extend_from_slice(
            b"\"\x01\x00\x00\x1d\x00\x00\x01\x7f\x01\xc0\x80\x02\xdf\xff\x02\xd0\x00\x02\xcf\xff\
              \x02\xf1\x00\x10\x03\xf1\xff\xef\x03\xf1\xff\x7f\x03\xf1\x00\x80\x03\xf2\x00\
              \x80\x00\x04\xf2\xff\x7f\xff\x04\xf2\xff\xff\x7f\x04\xf2\x00\x00\x80\x04\xf3\
              \x00\x00\x80\x00\x05\xf3\xff\xff\x7f\xff\x05\xf3\xff\xff\xff\x7f\x05\xf3\x00\
              \x00\x00\x80\x05\xf4\x00\x00\x00\x80\x00\x00\x00\x00\x09\xf4\xff\xff\xff\x7f\
              \xff\xff\xff\xff\x09\xf4\xff\xff\xff\xff\xff\xff\xff\x7f\x09\xf4\x00\x00\x00\
              \x00\x00\x00\x00\x80\x09\x939223372036854775808\x14\x80\x01\x8201\x03\x82-0\
              \x03\x82+1\x03\xbf",
        );
        lp.extend_from_slice(&[b'a'; 63]);
        lp.extend_from_slice(b"@\xe0@");
        lp.extend_from_slice(&[b'b'; 64]);
        lp.extend_from_slice(b"B\xff");
        lp
    }

    #[test]
    fn builder_matches_redis_list_with_every_integer_boundary() {
        let a = [b'a'; 63];
        let b = [b'b'; 64];
        let mut values: Vec<&[u8]> = LIST_VALUES.iter().map(|s| s.as_bytes()).collect();
        values.push(&a);
        values.push(&b);
        let expected = redis_list();
        assert_eq!(expected.len(), 290);
        assert_eq!(build(&values), expected);

        let decoded = items(&expected);
        let want_ints: [i64; 22] = [
            0,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            -32769,
            8388607,
            -8388608,
            8388608,
            -8388609,
            2147483647,
            -2147483648,
            2147483648,
            -2147483649,
            i64::MAX,
            i64::MIN,
        ];
        for (item, want) in decoded.iter().zip(want_ints) {
            assert_eq!(*item, Item::Int(want));
        }
        let strings: Vec<Item<'_>> = decoded[22..].to_vec();
        assert_eq!(
            strings,
            vec![
                Item::Str(b"9223372036854775808"),
                Item::Str(b""),
                Item::Str(b"01"),
                Item::Str(b"-0"),
                Item::Str(b"+1"),
                Item::Str(&a),
                Item::Str(&b),
            ]
        );
        assert_eq!(validate(&expected), Ok(29));
        assert_eq!(entries(&expected).unwrap().header_count(), Some(29));
    }

    #[test]
    fn a_listpack_appended_to_a_buffer_is_the_same_after_it() {
        let a = [b'a'; 200];
        let mut values: Vec<&[u8]> = LIST_VALUES.iter().map(|s| s.as_bytes()).collect();
        values.push(&a);
        let alone = build(&values);
        let mut b = Builder::append_to(b"before".to_vec());
        for v in &values {
            b.push_str(v);
        }
        assert_eq!(b.bytes(), alone.len());
        assert_eq!(b.len(), values.len());
        let both = b.finish();
        assert_eq!(&both[..6], b"before");
        assert_eq!(&both[6..], &alone[..]);
    }

    #[test]
    fn builder_matches_redis_small_hash_and_zset() {
        // Redis 7.0.15: HSET h a 1 b hello; DUMP h (RDB_TYPE_HASH_LISTPACK).
        let hash = b"\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff";
        assert_eq!(build(&[b"a", b"1", b"b", b"hello"]), hash);
        assert_eq!(
            items(hash),
            vec![
                Item::Str(b"a"),
                Item::Int(1),
                Item::Str(b"b"),
                Item::Str(b"hello")
            ]
        );
        // Redis 7.0.15: ZADD z 1.5 a -2 b 3e100 c inf d; DUMP z. Member then
        // score (as text, which "-2" turns into an integer), in score order.
        let zset = b"9\x00\x00\x00\x08\x00\x81b\x02\xdf\xfe\x02\x81a\x02\x831.5\x04\x81c\x02\
                     \x972.9999999999999999e+100\x18\x81d\x02\x83inf\x04\xff";
        let built = build(&[
            b"b",
            b"-2",
            b"a",
            b"1.5",
            b"c",
            b"2.9999999999999999e+100",
            b"d",
            b"inf",
        ]);
        assert_eq!(built, zset);
        assert_eq!(items(zset)[1], Item::Int(-2));
    }

    #[test]
    fn backlen_boundaries_match_redis() {
        // Redis 7.0.15, RPUSH of one string of n × "x": (n, listpack size,
        // the last bytes: data, backlen, terminator). 125/126 cross the
        // one/two-byte backlen at entry size 127/128; 16377/16378 cross the
        // two/three-byte one at 16382/16383 (Redis's strict `< 16383`).
        let cases: [(usize, usize, &[u8]); 4] = [
            (125, 135, b"xx\x7f\xff"),
            (126, 137, b"x\x01\x80\xff"),
            (16377, 16391, b"x\x7f\xfe\xff"),
            (16378, 16393, b"\x00\xff\xff\xff"),
        ];
        for (n, size, tail) in cases {
            let s = vec![b'x'; n];
            let mut b = Builder::new();
            b.push_str(&s);
            assert_eq!(b.bytes(), size);
            let lp = b.finish();
            assert_eq!(lp.len(), size);
            assert!(lp.ends_with(tail), "n = {n}");
            assert_eq!(items(&lp), vec![Item::Str(&s)]);
        }
        for (len, size) in [
            (1, 1),
            (127, 1),
            (128, 2),
            (16382, 2),
            (16383, 3),
            (2_097_150, 3),
            (2_097_151, 4),
            (268_435_454, 4),
            (268_435_455, 5),
        ] {
            assert_eq!(backlen_size(len), size, "entry of {len} bytes");
        }
    }

    #[test]
    fn element_count_saturates_at_65535_like_redis() {
        // Redis 7.0.15: HSET h f0 0 f1 1 ... with 32767 and 32768 pairs
        // (hash-max-listpack-entries raised): size, header, last 8 bytes.
        let cases: [(usize, usize, &[u8], &[u8]); 2] = [
            (
                32767,
                377877,
                b"\x15\xc4\x05\x00\xfe\xff",
                b"\x36\x36\x07\xf1\xfe\x7f\x03\xff",
            ),
            (
                32768,
                377889,
                b"\x21\xc4\x05\x00\xff\xff",
                b"\x36\x37\x07\xf1\xff\x7f\x03\xff",
            ),
        ];
        for (pairs, size, header, tail) in cases {
            let mut b = Builder::new();
            for i in 0..pairs {
                b.push_str(format!("f{i}").as_bytes());
                b.push_str(i.to_string().as_bytes());
            }
            assert_eq!(b.len(), pairs * 2);
            let lp = b.finish();
            assert_eq!(lp.len(), size);
            assert_eq!(&lp[..6], header);
            assert!(lp.ends_with(tail));
            let it = entries(&lp).unwrap();
            assert_eq!(it.header_count(), (pairs * 2 < 65535).then_some(pairs * 2));
            assert_eq!(validate(&lp), Ok(pairs * 2));
        }
        // Exactly 65535 elements: the header says "unknown" too.
        let mut b = Builder::new();
        for i in 0..65535 {
            b.push_int(i % 100);
        }
        let lp = b.finish();
        assert_eq!(&lp[4..6], b"\xff\xff");
        assert_eq!(validate(&lp), Ok(65535));
    }

    #[test]
    fn push_str_and_push_int_agree_on_canonical_integers() {
        for v in [
            0,
            1,
            127,
            128,
            -1,
            -4096,
            -4097,
            4095,
            4096,
            32767,
            32768,
            -32768,
            -32769,
            8_388_607,
            8_388_608,
            -8_388_608,
            -8_388_609,
            i64::from(i32::MAX),
            i64::from(i32::MAX) + 1,
            i64::from(i32::MIN),
            i64::from(i32::MIN) - 1,
            i64::MAX,
            i64::MIN,
        ] {
            let mut a = Builder::new();
            a.push_int(v);
            let mut b = Builder::new();
            b.push_str(v.to_string().as_bytes());
            let (a, b) = (a.finish(), b.finish());
            assert_eq!(a, b, "{v}");
            assert_eq!(items(&a), vec![Item::Int(v)]);
        }
        // Not canonical: stored as strings.
        for s in [
            &b"-0"[..],
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"9223372036854775808",
            b"-9223372036854775809",
        ] {
            assert_eq!(items(&build(&[s])), vec![Item::Str(s)]);
        }
    }

    #[test]
    fn string_encoding_boundaries_round_trip() {
        for (n, head) in [
            (0usize, 1usize),
            (63, 1),
            (64, 2),
            (4095, 2),
            (4096, 5),
            (70000, 5),
        ] {
            let s = vec![b'z'; n];
            let lp = build(&[&s, b"k"]);
            assert_eq!(lp.len(), 6 + head + n + backlen_size(head + n) + 2 + 1 + 1);
            assert_eq!(items(&lp), vec![Item::Str(&s), Item::Str(b"k")]);
        }
    }

    #[test]
    fn empty_listpack() {
        let b = Builder::new();
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 7);
        let lp = b.finish();
        assert_eq!(lp, b"\x07\x00\x00\x00\x00\x00\xff");
        assert_eq!(validate(&lp), Ok(0));
        assert_eq!(Builder::default().finish(), lp);
    }

    /// The error of the first failing element (or of the header).
    fn first_error(lp: &[u8]) -> String {
        match entries(lp) {
            Err(e) => e.0,
            Ok(it) => it
                .filter_map(Result::err)
                .next()
                .map(|e| e.0)
                .unwrap_or_default(),
        }
    }

    #[test]
    fn malformed_listpacks_are_rejected_with_the_offset() {
        let good = build(&[b"ab", b"5"]); // 81 'a' 'b' 03 | 05 01 | ff
        assert_eq!(validate(&good), Ok(2));

        assert!(first_error(b"\x06\x00\x00\x00\x00\x00").contains("shorter"));
        let mut bad = good.clone();
        bad[0] += 1;
        assert!(first_error(&bad).contains("header says 14 bytes"));
        let mut bad = good.clone();
        *bad.last_mut().unwrap() = 0;
        assert!(first_error(&bad).contains("terminator at offset 12"));
        let mut bad = good.clone();
        bad[4] = 3;
        assert!(first_error(&bad).contains("counts 3 elements at offset 4, but it has 2"));
        let mut bad = good.clone();
        bad[4] = 0xff;
        bad[5] = 0xff;
        assert_eq!(validate(&bad), Ok(2), "65535 means unknown");
        let mut bad = good.clone();
        bad[9] = 4; // The backlen of "ab".
        assert_eq!(
            first_error(&bad),
            "listpack entry at offset 6 has a backlen not matching its size 3"
        );
        let mut bad = good.clone();
        bad[10] = 0xf5; // No such encoding.
        assert_eq!(
            first_error(&bad),
            "listpack entry at offset 10 has invalid encoding byte 0xf5"
        );
        let mut bad = good.clone();
        bad[6] = 0x85; // A 5-byte string: runs over the next entry and the end.
        assert_eq!(
            first_error(&bad),
            "listpack entry at offset 6 overruns the listpack"
        );
        let mut bad = good.clone();
        bad[10] = 0xff; // A terminator in the middle.
        assert!(first_error(&bad).contains("terminator at offset 10 before its end"));
        // A 12-bit string header cut by the terminator.
        assert!(first_error(b"\x08\x00\x00\x00\x01\x00\xe0\xff").contains("offset 6 overruns"));
    }

    #[test]
    fn iteration_stops_after_the_first_error() {
        let mut lp = build(&[b"ab", b"5", b"6"]);
        lp[9] = 9; // Break the first backlen.
        let mut it = entries(&lp).unwrap();
        assert!(matches!(it.next(), Some(Err(_))));
        assert_eq!(it.next(), None);
        assert_eq!(it.next(), None);
    }

    #[test]
    fn huge_declared_lengths_fail_fast() {
        // A 32-bit string claiming 4 GiB in a 12-byte listpack.
        let lp = b"\x0c\x00\x00\x00\x01\x00\xf0\xff\xff\xff\xff\xff";
        assert_eq!(
            first_error(lp),
            "listpack entry at offset 6 overruns the listpack"
        );
        // A header counting 65534 elements in an empty listpack.
        let lp = b"\x07\x00\x00\x00\xfe\xff\xff";
        assert!(first_error(lp).contains("counts 65534 elements"));
    }

    /// Arbitrary elements for property tests: integers and strings of every
    /// encoding size class.
    fn elements(seed: Vec<(bool, i64, u16)>) -> Vec<Vec<u8>> {
        seed.into_iter()
            .map(|(is_int, v, len)| {
                if is_int {
                    // Spread over all integer widths.
                    let shift = (v as u64 % 64) as u32;
                    (v >> shift).to_string().into_bytes()
                } else {
                    let len = usize::from(len) % 5000;
                    (0..len).map(|i| (i as u8).wrapping_mul(31)).collect()
                }
            })
            .collect()
    }

    #[test]
    fn builder_round_trips() {
        fn prop(seed: Vec<(bool, i64, u16)>) -> bool {
            let values = elements(seed);
            let mut b = Builder::new();
            for v in &values {
                b.push_str(v);
            }
            let bytes = b.bytes();
            let lp = b.finish();
            let back: Vec<Vec<u8>> = entries(&lp)
                .unwrap()
                .map(|i| i.unwrap().to_blob().to_vec())
                .collect();
            lp.len() == bytes && back == values && validate(&lp) == Ok(values.len())
        }
        QuickCheck::new()
            .tests(300)
            .quickcheck(prop as fn(Vec<(bool, i64, u16)>) -> bool);
    }

    /// Walks the whole thing; the property is that it returns at all.
    fn walk(lp: &[u8]) -> usize {
        match entries(lp) {
            Ok(it) => it.take_while(Result::is_ok).count(),
            Err(_) => 0,
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        fn prop(bytes: Vec<u8>, fix_header: bool) -> bool {
            let mut lp = bytes;
            if fix_header && lp.len() >= 7 {
                // Make the header and terminator valid so that the entry
                // decoder is reached.
                let n = lp.len() as u32;
                lp[..4].copy_from_slice(&n.to_le_bytes());
                *lp.last_mut().unwrap() = 0xff;
            }
            walk(&lp);
            let _ = validate(&lp);
            true
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }

    #[test]
    fn truncated_and_bit_flipped_listpacks_never_panic() {
        fn prop(seed: Vec<(bool, i64, u16)>, cut: usize, flips: Vec<(usize, u8)>) -> TestResult {
            let values = elements(seed);
            let mut b = Builder::new();
            for v in &values {
                b.push_str(v);
            }
            let lp = b.finish();
            // Truncation, with and without a fixed-up header.
            let cut = cut % lp.len();
            let mut short = lp[..cut].to_vec();
            walk(&short);
            if short.len() >= 7 {
                let n = short.len() as u32;
                short[..4].copy_from_slice(&n.to_le_bytes());
                *short.last_mut().unwrap() = 0xff;
                walk(&short);
            }
            // Bit flips (the header's size is left alone half the time so
            // that the flips reach the entries).
            let mut flipped = lp.clone();
            for (at, mask) in flips {
                let at = at % flipped.len();
                if at >= 4 || mask & 1 == 0 {
                    flipped[at] ^= mask;
                }
            }
            walk(&flipped);
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<(bool, i64, u16)>, usize, Vec<(usize, u8)>) -> TestResult);
    }
}
