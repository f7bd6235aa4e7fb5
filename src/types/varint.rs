//! LEB128 varints, the length prefixes of the packed encodings (list
//! chunks, small hashes, small sorted sets): seven bits a byte, low bits
//! first, the high bit set on every byte but the last.

/// Bytes of the encoding of `n`.
#[inline]
pub(crate) fn len(mut n: u64) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// Writes `n` at the start of `dst`; returns the bytes written.
#[inline]
pub(crate) fn write(dst: &mut [u8], mut n: u64) -> usize {
    let mut i = 0;
    while n >= 0x80 {
        dst[i] = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    dst[i] = n as u8;
    i + 1
}

/// Reads the varint at `pos`: (value, offset past it).
#[inline]
pub(crate) fn read(buf: &[u8], mut pos: usize) -> (u64, usize) {
    let first = buf[pos];
    if first < 0x80 {
        return (u64::from(first), pos + 1);
    }
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let byte = buf[pos];
        pos += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return (n, pos);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_at_the_byte_boundaries() {
        for n in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            (1 << 21) - 1,
            1 << 21,
            u64::MAX,
        ] {
            let mut buf = [0u8; 10];
            let used = super::write(&mut buf, n);
            assert_eq!(used, super::len(n), "{n}");
            assert_eq!(super::read(&buf, 0), (n, used), "{n}");
        }
    }
}
