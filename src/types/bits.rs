//! Bit operations on strings, as the bitmap commands see them (Redis's
//! `bitops.c` conventions): bit 0 is the most significant bit of the first
//! byte, and integers stored by BITFIELD are big-endian across bytes.
//!
//! Pure functions on byte slices; the commands live in `command::bitops`.

/// The number of set bits in `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut count: u64 = 0;
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
        count += u64::from(word.count_ones());
    }
    count
        + chunks
            .remainder()
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum::<u64>()
}

/// The position of the first bit equal to `bit` in `bytes`. When there is
/// none: -1 when looking for a 1, and the first bit past the end
/// (`8 * len`) when looking for a 0, as if the string went on with zeros
/// (Redis's `redisBitpos`).
pub fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0x00 } else { 0xff };
    match bytes.iter().position(|&b| b != skip) {
        Some(i) => {
            let b = if bit { bytes[i] } else { !bytes[i] };
            (i as i64) * 8 + i64::from(b.leading_zeros())
        }
        None if bit => -1,
        None => bytes.len() as i64 * 8,
    }
}

/// The position of the first bit equal to `bit` among bits `from..=to`
/// of `bytes` (both inside `bytes`), if any.
pub fn first_bit_in(bytes: &[u8], from: u64, to: u64, bit: bool) -> Option<u64> {
    let (first, last) = ((from >> 3) as usize, (to >> 3) as usize);
    let wanted = |i: usize| {
        let mut b = if bit { bytes[i] } else { !bytes[i] };
        if i == first {
            b &= 0xff >> (from & 7);
        }
        if i == last {
            b &= 0xff << (7 - (to & 7));
        }
        b
    };
    if wanted(first) != 0 {
        return Some(first as u64 * 8 + u64::from(wanted(first).leading_zeros()));
    }
    if last == first {
        return None;
    }
    let middle = &bytes[first + 1..last];
    let found = first_bit(middle, bit);
    if found >= 0 && (found as usize) < middle.len() * 8 {
        return Some((first as u64 + 1) * 8 + found as u64);
    }
    let b = wanted(last);
    (b != 0).then(|| last as u64 * 8 + u64::from(b.leading_zeros()))
}

/// The bit at `offset`; bits past the end read as 0.
pub fn get_bit(bytes: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    byte < bytes.len() && bytes[byte] & (0x80 >> (offset & 7)) != 0
}

/// Sets the bit at `offset`, which must be inside `bytes`.
pub fn set_bit(bytes: &mut [u8], offset: u64, on: bool) {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    if on {
        bytes[byte] |= mask;
    } else {
        bytes[byte] &= !mask;
    }
}

/// The `bits`-wide (1 to 64) unsigned integer at bit `offset`; bits past
/// the end read as 0.
pub fn get_unsigned(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |value, j| {
        (value << 1) | u64::from(get_bit(bytes, offset + j))
    })
}

/// The `bits`-wide (1 to 64) two's complement integer at bit `offset`.
pub fn get_signed(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    let raw = get_unsigned(bytes, offset, bits);
    if bits < 64 && raw & (1 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}

/// Stores the low `bits` bits of `value` at bit `offset`; the field must
/// lie inside `bytes`.
pub fn set_unsigned(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let on = value & (1u64 << (u64::from(bits) - 1 - j)) != 0;
        set_bit(bytes, offset + j, on);
    }
}

/// What BITFIELD does when a SET or INCRBY result does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Keep the low bits (two's complement wrap for signed fields).
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Do not write; the reply is a null.
    Fail,
}

/// `Some(result)` when `value + incr` does not fit in an unsigned field of
/// `bits` (1 to 63) bits, with the result `mode` gives (0 for
/// [`Overflow::Fail`], which writes nothing); `None` when it fits.
/// `value` itself may be out of range (a SET's argument, with `incr` 0).
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, mode: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let high = value > max || (incr > 0 && incr > max_incr);
    let low = !high && incr < 0 && incr < min_incr;
    if !high && !low {
        return None;
    }
    Some(match mode {
        Overflow::Wrap => {
            let mask = if bits == 64 { 0 } else { u64::MAX << bits };
            value.wrapping_add(incr as u64) & !mask
        }
        Overflow::Sat if high => max,
        Overflow::Sat | Overflow::Fail => 0,
    })
}

/// `Some(result)` when `value + incr` does not fit in a signed field of
/// `bits` (1 to 64) bits, with the result `mode` gives (0 for
/// [`Overflow::Fail`]); `None` when it fits.
pub fn signed_overflow(value: i64, incr: i64, bits: u32, mode: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let narrow = bits != 64;
    let high =
        value > max || (narrow && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr);
    let low = !high
        && (value < min
            || (narrow && incr < min_incr)
            || (value < 0 && incr < 0 && incr < min_incr));
    if !high && !low {
        return None;
    }
    Some(match mode {
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if narrow {
                let mask = u64::MAX << bits;
                if c & (1u64 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            c as i64
        }
        Overflow::Sat if high => max,
        Overflow::Sat => min,
        Overflow::Fail => 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn popcount_counts_every_byte() {
        assert_eq!(popcount(b""), 0);
        assert_eq!(popcount(b"foobar"), 26);
        let long: Vec<u8> = (0..=255u8).collect();
        assert_eq!(popcount(&long), 256 * 4);
    }

    #[test]
    fn first_bit_pads_with_zeros() {
        assert_eq!(first_bit(&[0xff, 0xf0], false), 12);
        assert_eq!(first_bit(&[0xff, 0xff], false), 16);
        assert_eq!(first_bit(&[0x00, 0x01], true), 15);
        assert_eq!(first_bit(&[0x00], true), -1);
        assert_eq!(first_bit(&[], false), 0);
    }

    #[test]
    fn first_bit_in_respects_both_edges() {
        let b = [0xff, 0x00, 0x0f];
        assert_eq!(first_bit_in(&b, 0, 23, false), Some(8));
        assert_eq!(first_bit_in(&b, 3, 7, false), None);
        assert_eq!(first_bit_in(&b, 3, 8, false), Some(8));
        assert_eq!(first_bit_in(&b, 9, 19, true), None);
        assert_eq!(first_bit_in(&b, 9, 20, true), Some(20));
        assert_eq!(first_bit_in(&b, 2, 2, true), Some(2));
        assert_eq!(first_bit_in(&b, 22, 23, false), None);
    }

    #[test]
    fn bits_are_big_endian() {
        let mut b = [0u8; 2];
        set_unsigned(&mut b, 7, 5, 23);
        assert_eq!(b, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&b, 7, 5), 23);
        assert_eq!(get_signed(&b, 7, 5), 23 - 32);
        assert_eq!(get_unsigned(&b, 12, 64), 0);
        set_bit(&mut b, 0, true);
        assert!(get_bit(&b, 0) && !get_bit(&b, 1) && !get_bit(&b, 99));
        let mut w = [0u8; 8];
        set_unsigned(&mut w, 0, 64, u64::MAX);
        assert_eq!(get_signed(&w, 0, 64), -1);
    }

    #[test]
    fn unsigned_overflow_modes() {
        assert_eq!(unsigned_overflow(250, 5, 8, Overflow::Wrap), None);
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), Some(251));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Sat), Some(255));
        assert!(unsigned_overflow(300, 0, 8, Overflow::Fail).is_some());
    }

    #[test]
    fn signed_overflow_modes() {
        assert_eq!(signed_overflow(120, 7, 8, Overflow::Wrap), None);
        assert_eq!(signed_overflow(120, 8, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(120, 8, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-120, -9, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(-120, -9, 8, Overflow::Wrap), Some(127));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(signed_overflow(-1, 1, 64, Overflow::Sat), None);
        assert_eq!(signed_overflow(200, 0, 8, Overflow::Wrap), Some(-56));
    }
}
