//! Intset: the sorted array of integers Redis uses for small sets whose
//! members are all integers.
//!
//! Layout: encoding u32 LE (bytes per value: 2, 4 or 8), length u32 LE, then
//! `length` values of that width, little-endian, strictly ascending. Every
//! value has the same width, that of the widest value ever added (Redis
//! does not narrow an intset when the wide values are removed).

use super::EncodingError;

/// Size of the intset header: encoding (u32) + length (u32).
const HEADER_BYTES: usize = 8;

/// Decodes an intset, checking it the way Redis's `intsetValidateIntegrity`
/// (deep) does: a known width, a size that is exactly header + length ×
/// width, at least one value, values strictly ascending.
pub fn decode(data: &[u8]) -> Result<Vec<i64>, EncodingError> {
    if data.len() < HEADER_BYTES {
        return Err(EncodingError::new(format!(
            "intset of {} bytes is shorter than its 8-byte header",
            data.len()
        )));
    }
    let width = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    if !matches!(width, 2 | 4 | 8) {
        return Err(EncodingError::new(format!(
            "intset encoding {width} at offset 0 is not 2, 4 or 8"
        )));
    }
    let count = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    // u64 arithmetic cannot overflow here: at most 2^32 × 8 + 8.
    let expected = HEADER_BYTES as u64 + u64::from(count) * u64::from(width);
    if expected != data.len() as u64 {
        return Err(EncodingError::new(format!(
            "intset header at offset 4 says {count} values of {width} bytes ({expected} bytes), \
             but it has {} bytes",
            data.len()
        )));
    }
    if count == 0 {
        return Err(EncodingError::new("intset is empty (length 0 at offset 4)"));
    }
    // The size check above bounds the allocation by the input length.
    let width = width as usize;
    let mut values = Vec::with_capacity(count as usize);
    for (i, chunk) in data[HEADER_BYTES..].chunks_exact(width).enumerate() {
        let v = match *chunk {
            [a, b] => i64::from(i16::from_le_bytes([a, b])),
            [a, b, c, d] => i64::from(i32::from_le_bytes([a, b, c, d])),
            _ => {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(chunk);
                i64::from_le_bytes(raw)
            }
        };
        if let Some(&prev) = values.last() {
            if v <= prev {
                return Err(EncodingError::new(format!(
                    "intset value {v} at offset {} is not greater than the previous {prev}",
                    HEADER_BYTES + i * width
                )));
            }
        }
        values.push(v);
    }
    Ok(values)
}

/// Encodes strictly ascending integers as an intset in the narrowest width
/// that holds every value, as Redis lays out a set it built by adding them.
/// The caller guarantees the order (the values of a Redis set are distinct).
pub fn encode(sorted: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(sorted, &mut out);
    out
}

/// [`encode`], appended to `out`.
pub fn encode_into(sorted: &[i64], out: &mut Vec<u8>) {
    debug_assert!(
        sorted.windows(2).all(|w| w[0] < w[1]),
        "intset::encode needs strictly ascending values"
    );
    let width: usize = if sorted.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if sorted.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let count = u32::try_from(sorted.len())
        .expect("intset of 2^32 values or more: Redis caps set-max-intset-entries far below");
    out.reserve(HEADER_BYTES + sorted.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::QuickCheck;

    /// Intsets written by real Redis: `set_zipped_1/2/3` of Redis's own
    /// test fixture tests/assets/encodings.rdb (one per width), and Redis
    /// 7.0.15's `SADD st 5 -70000 3 100000 -5000000000` + `DUMP st`.
    const REDIS_INTSETS: &[(&[u8], &[i64])] = &[
        (
            b"\x02\x00\x00\x00\x04\x00\x00\x00\x01\x00\x02\x00\x03\x00\x04\x00",
            &[1, 2, 3, 4],
        ),
        (
            b"\x04\x00\x00\x00\x04\x00\x00\x00\xa0\x86\x01\x00@\x0d\x03\x00\xe0\x93\x04\x00\
              \x80\x1a\x06\x00",
            &[100_000, 200_000, 300_000, 400_000],
        ),
        (
            b"\x08\x00\x00\x00\x06\x00\x00\x00\x00\xca\x9a;\x00\x00\x00\x00\x00\x945w\x00\x00\
              \x00\x00\x00^\xd0\xb2\x00\x00\x00\x00\x00(k\xee\x00\x00\x00\x00\x00\xf2\x05*\x01\
              \x00\x00\x00\x00\xbc\xa0e\x01\x00\x00\x00",
            &[
                1_000_000_000,
                2_000_000_000,
                3_000_000_000,
                4_000_000_000,
                5_000_000_000,
                6_000_000_000,
            ],
        ),
        (
            b"\x08\x00\x00\x00\x05\x00\x00\x00\x00\x0e\xfa\xd5\xfe\xff\xff\xff\x90\xee\xfe\xff\
              \xff\xff\xff\xff\x03\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\
              \xa0\x86\x01\x00\x00\x00\x00\x00",
            &[-5_000_000_000, -70000, 3, 5, 100_000],
        ),
    ];

    #[test]
    fn decodes_and_encodes_redis_intsets() {
        for &(bytes, values) in REDIS_INTSETS {
            assert_eq!(decode(bytes).as_deref(), Ok(values));
            assert_eq!(encode(values), bytes);
        }
    }

    #[test]
    fn encode_picks_the_narrowest_width() {
        let width = |v: &[i64]| encode(v)[0];
        assert_eq!(width(&[i64::from(i16::MIN), i64::from(i16::MAX)]), 2);
        assert_eq!(width(&[i64::from(i16::MIN) - 1]), 4);
        assert_eq!(width(&[i64::from(i16::MAX) + 1]), 4);
        assert_eq!(width(&[i64::from(i32::MIN), i64::from(i32::MAX)]), 4);
        assert_eq!(width(&[i64::from(i32::MIN) - 1]), 8);
        assert_eq!(width(&[0, i64::from(i32::MAX) + 1]), 8);
        assert_eq!(width(&[i64::MIN, i64::MAX]), 8);
        for v in [
            &[i64::from(i16::MIN), -1, 0, i64::from(i16::MAX)][..],
            &[i64::from(i32::MIN), i64::from(i32::MAX)],
            &[i64::MIN, -1, i64::MAX],
        ] {
            assert_eq!(decode(&encode(v)).as_deref(), Ok(v));
        }
    }

    #[test]
    fn a_wider_encoding_than_needed_is_accepted() {
        // Redis never narrows an intset after removing its wide members.
        let bytes = b"\x08\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\
                      \x02\x00\x00\x00\x00\x00\x00\x00";
        assert_eq!(decode(bytes), Ok(vec![1, 2]));
    }

    #[test]
    fn malformed_intsets_are_rejected() {
        let err = |b: &[u8]| decode(b).unwrap_err().0;
        assert!(err(b"\x02\x00\x00").contains("shorter than its 8-byte header"));
        assert_eq!(
            err(b"\x03\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00"),
            "intset encoding 3 at offset 0 is not 2, 4 or 8"
        );
        assert!(err(b"\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00").contains("says 2 values"));
        assert!(err(b"\x02\x00\x00\x00\x00\x00\x00\x00").contains("empty"));
        assert_eq!(
            err(b"\x02\x00\x00\x00\x02\x00\x00\x00\x05\x00\x05\x00"),
            "intset value 5 at offset 10 is not greater than the previous 5"
        );
        assert!(err(b"\x02\x00\x00\x00\x02\x00\x00\x00\x05\x00\x04\x00").contains("offset 10"));
    }

    #[test]
    fn huge_declared_length_fails_fast() {
        // 2^32 - 1 values of 8 bytes declared in a 16-byte input: rejected
        // by the size check before anything is allocated.
        let bytes = b"\x08\x00\x00\x00\xff\xff\xff\xff\x01\x00\x00\x00\x00\x00\x00\x00";
        assert!(decode(bytes).unwrap_err().0.contains("4294967295 values"));
    }

    #[test]
    fn round_trips() {
        fn prop(mut values: Vec<i64>, shift: u8) -> bool {
            // Spread the values over the three widths.
            for v in &mut values {
                *v >>= u32::from(shift % 64);
            }
            values.sort_unstable();
            values.dedup();
            let bytes = encode(&values);
            if values.is_empty() {
                decode(&bytes).is_err()
            } else {
                decode(&bytes) == Ok(values)
            }
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<i64>, u8) -> bool);
    }

    #[test]
    fn random_truncated_and_flipped_bytes_never_panic() {
        fn prop(random: Vec<u8>, values: Vec<i16>, cut: usize, flips: Vec<(usize, u8)>) -> bool {
            let _ = decode(&random);
            let mut values: Vec<i64> = values.into_iter().map(i64::from).collect();
            values.sort_unstable();
            values.dedup();
            let good = encode(&values);
            let _ = decode(&good[..cut % (good.len() + 1)]);
            let mut flipped = good.clone();
            for (at, mask) in flips {
                let at = at % flipped.len();
                flipped[at] ^= mask;
            }
            let _ = decode(&flipped);
            true
        }
        QuickCheck::new()
            .tests(1000)
            .quickcheck(prop as fn(Vec<u8>, Vec<i16>, usize, Vec<(usize, u8)>) -> bool);
    }
}
