//! Zipmap: the compact hash encoding of Redis before 2.6 (RDB type 9).
//! Redis 7 still loads it from old RDB files (converting it), so this module
//! only decodes it.
//!
//! Layout: zmlen (one byte: the pair count, or 254 or more for "count
//! them"), then per pair: key length, key, value length, a "free" byte, the
//! value, and `free` unused bytes; then a 0xFF terminator. A length is one
//! byte below 254, or 254 followed by a u32 LE.

use super::EncodingError;

/// A zmlen of this value or more means the count is unknown; a length byte
/// of this value announces a u32 length.
const BIG_LEN: u8 = 254;
/// The terminator byte.
const END: u8 = 0xFF;

/// One field and its value, borrowed from the zipmap.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// Decodes a zipmap into its (key, value) pairs, checking it the way Redis's
/// `zipmapValidateIntegrity` (deep) does: every length within the bytes
/// present, the terminator at the last byte, at least one pair, and zmlen
/// (when below 254) equal to the number of pairs.
pub fn entries(zm: &[u8]) -> Result<Vec<Pair<'_>>, EncodingError> {
    if zm.len() < 2 {
        return Err(EncodingError::new(format!(
            "zipmap of {} bytes is shorter than its 2-byte minimum",
            zm.len()
        )));
    }
    let end = zm.len() - 1;
    if zm[end] != END {
        return Err(EncodingError::new(format!(
            "zipmap does not end with the 0xFF terminator at offset {end}"
        )));
    }
    let mut pairs = Vec::new();
    let mut pos = 1usize;
    while zm[pos] != END {
        let entry_at = pos;
        let (key, next) = string_at(zm, pos, "key", entry_at)?;
        let (value_len, after_len) = length_at(zm, next, "value", entry_at)?;
        // The free byte, then the value and `free` padding bytes.
        let free = usize::from(zm[after_len]);
        let value_at = after_len + 1;
        let value = value_at
            .checked_add(value_len)
            .filter(|&value_end| value_end <= end)
            .map(|value_end| &zm[value_at..value_end])
            .ok_or_else(|| overrun("value", entry_at))?;
        pos = (value_at + value_len)
            .checked_add(free)
            .filter(|&p| p <= end)
            .ok_or_else(|| overrun("value padding", entry_at))?;
        pairs.push((key, value));
    }
    if pos != end {
        return Err(EncodingError::new(format!(
            "zipmap terminator at offset {pos} before its end at offset {end}"
        )));
    }
    if pairs.is_empty() {
        return Err(EncodingError::new("zipmap is empty"));
    }
    if zm[0] < BIG_LEN && usize::from(zm[0]) != pairs.len() {
        return Err(EncodingError::new(format!(
            "zipmap header at offset 0 counts {} pairs, but it has {}",
            zm[0],
            pairs.len()
        )));
    }
    Ok(pairs)
}

/// The error for a part of the entry at `entry_at` that runs past the
/// terminator.
fn overrun(what: &str, entry_at: usize) -> EncodingError {
    EncodingError::new(format!(
        "zipmap entry at offset {entry_at} overruns the zipmap in its {what}"
    ))
}

/// Reads the length at `pos` (which is before the terminator); returns it
/// and the offset after it, which is still before or at the terminator.
fn length_at(
    zm: &[u8],
    pos: usize,
    what: &str,
    entry_at: usize,
) -> Result<(usize, usize), EncodingError> {
    let end = zm.len() - 1;
    match zm[pos] {
        BIG_LEN => {
            if pos + 5 > end {
                return Err(overrun(&format!("{what} length"), entry_at));
            }
            let b = &zm[pos + 1..pos + 5];
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let len =
                usize::try_from(len).map_err(|_| overrun(&format!("{what} length"), entry_at))?;
            Ok((len, pos + 5))
        }
        END => Err(EncodingError::new(format!(
            "zipmap entry at offset {entry_at} has an invalid {what} length byte 0xff \
             at offset {pos}"
        ))),
        b => {
            if pos + 1 > end {
                return Err(overrun(&format!("{what} length"), entry_at));
            }
            Ok((usize::from(b), pos + 1))
        }
    }
}

/// Reads a length-prefixed string at `pos`; returns it and the offset after
/// it (at or before the terminator).
fn string_at<'a>(
    zm: &'a [u8],
    pos: usize,
    what: &str,
    entry_at: usize,
) -> Result<(&'a [u8], usize), EncodingError> {
    let end = zm.len() - 1;
    let (len, at) = length_at(zm, pos, what, entry_at)?;
    let to = at
        .checked_add(len)
        .filter(|&to| to <= end)
        .ok_or_else(|| overrun(what, entry_at))?;
    Ok((&zm[at..to], to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::QuickCheck;

    type Pairs<'a> = Vec<Pair<'a>>;

    fn err(zm: &[u8]) -> String {
        entries(zm).unwrap_err().0
    }

    #[test]
    fn decodes_the_zipmap_written_by_redis() {
        // Redis's test fixture tests/assets/hash-zipmap.rdb (RDB 3), key
        // "hash", type 9: f1 => v1, f2 => v2.
        let zm = b"\x02\x02f1\x02\x00v1\x02f2\x02\x00v2\xff";
        let want: Pairs<'_> = vec![(b"f1", b"v1"), (b"f2", b"v2")];
        assert_eq!(entries(zm), Ok(want));
    }

    #[test]
    fn decodes_the_example_in_zipmap_c() {
        // The layout comment of zipmap.c: "foo" => "bar", "hello" => "world".
        let zm = b"\x02\x03foo\x03\x00bar\x05hello\x05\x00world\xff";
        let want: Pairs<'_> = vec![(b"foo", b"bar"), (b"hello", b"world")];
        assert_eq!(entries(zm), Ok(want));
    }

    #[test]
    fn skips_free_bytes_and_reads_long_lengths() {
        // Built from zipmap.c's layout: a value with 2 free bytes after it
        // (left by zipmapSet shrinking a value), an empty key and value, and
        // a 300-byte key and value, whose lengths take 254 + u32 LE.
        let long = vec![b'k'; 300];
        let mut zm = vec![3u8];
        zm.extend_from_slice(b"\x01a\x01\x02b..");
        zm.extend_from_slice(b"\x00\x00\x00");
        zm.extend_from_slice(b"\xfe\x2c\x01\x00\x00");
        zm.extend_from_slice(&long);
        zm.extend_from_slice(b"\xfe\x2c\x01\x00\x00\x00");
        zm.extend_from_slice(&long);
        zm.push(0xff);
        let want: Pairs<'_> = vec![(b"a", b"b"), (b"", b""), (&long, &long)];
        assert_eq!(entries(&zm), Ok(want));
        // zmlen 254 or more: not a count, any number of pairs.
        zm[0] = 254;
        assert_eq!(entries(&zm).map(|p| p.len()), Ok(3));
        zm[0] = 255;
        assert_eq!(entries(&zm).map(|p| p.len()), Ok(3));
    }

    #[test]
    fn malformed_zipmaps_are_rejected_with_the_offset() {
        assert!(err(b"\xff").contains("shorter"));
        assert!(err(b"\x01\x01a\x01\x00b").contains("terminator at offset 5"));
        assert_eq!(err(b"\x00\xff"), "zipmap is empty");
        assert_eq!(
            err(b"\x02\x01a\x01\x00b\xff"),
            "zipmap header at offset 0 counts 2 pairs, but it has 1"
        );
        assert_eq!(
            err(b"\x01\x05a\x01\x00b\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its key"
        );
        assert_eq!(
            err(b"\x01\x01a\x05\x00b\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its value"
        );
        assert_eq!(
            err(b"\x01\x01a\x01\x03b\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its value padding"
        );
        assert_eq!(
            err(b"\x01\x01a\xff"),
            "zipmap entry at offset 1 has an invalid value length byte 0xff at offset 3"
        );
        assert_eq!(
            err(b"\x01\x01a\xfe\x01\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its value length"
        );
        // The free byte is the terminator: the value then runs past it.
        assert!(err(b"\x01\x01a\x00\xff").contains("in its value"));
    }

    #[test]
    fn huge_declared_lengths_fail_fast() {
        assert_eq!(
            err(b"\x01\xfe\xff\xff\xff\xff\x00\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its key"
        );
        assert_eq!(
            err(b"\x01\x00\xfe\xff\xff\xff\xff\x00\xff"),
            "zipmap entry at offset 1 overruns the zipmap in its value"
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        fn prop(mut bytes: Vec<u8>, fix_end: bool) -> bool {
            if fix_end {
                bytes.push(0xff);
            }
            let _ = entries(&bytes);
            true
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
    }

    #[test]
    fn truncated_and_bit_flipped_zipmaps_never_panic() {
        fn prop(cut: usize, flips: Vec<(usize, u8)>) -> bool {
            let good: &[u8] = b"\x03\x03foo\x03\x02bar..\x05hello\x05\x00world\x00\x00\x00\xff";
            assert_eq!(entries(good).map(|p| p.len()), Ok(3));
            let cut = cut % good.len();
            let _ = entries(&good[..cut]);
            let _ = entries(&[&good[..cut], &[0xff]].concat());
            let mut flipped = good.to_vec();
            for (at, mask) in flips {
                let at = at % flipped.len();
                flipped[at] ^= mask;
            }
            let _ = entries(&flipped);
            true
        }
        QuickCheck::new()
            .tests(1000)
            .quickcheck(prop as fn(usize, Vec<(usize, u8)>) -> bool);
    }
}
