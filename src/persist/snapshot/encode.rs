//! Primitive encoding.

use crate::types::stream::StreamId;
use crate::types::Blob;

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub(super) fn put_zigzag(out: &mut Vec<u8>, n: i64) {
    put_varint(out, zigzag(n));
}

pub(super) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Writes `id` delta-encoded against `prev` (docs: stream IDs). The
/// caller guarantees `id > prev`.
pub(super) fn put_id(out: &mut Vec<u8>, prev: Option<StreamId>, id: StreamId) {
    match prev {
        None => {
            put_varint(out, id.ms);
            put_varint(out, id.seq);
        }
        Some(p) => {
            let ms_delta = id.ms.wrapping_sub(p.ms);
            put_varint(out, ms_delta);
            if ms_delta == 0 {
                put_varint(out, id.seq.wrapping_sub(p.seq).wrapping_sub(1));
            } else {
                put_varint(out, id.seq);
            }
        }
    }
}

pub(super) fn put_abs_id(out: &mut Vec<u8>, id: StreamId) {
    put_varint(out, id.ms);
    put_varint(out, id.seq);
}

/// A decoding error: what is wrong (the position is the reader's).
pub(super) type Malformed = &'static str;

/// A cursor over untrusted bytes: every read checks the bounds.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn u8(&mut self) -> Result<u8, Malformed> {
        let b = *self.buf.get(self.pos).ok_or("ends inside a record")?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.remaining() {
            return Err("a length runs past the end");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(super) fn u32_le(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(super) fn varint(&mut self) -> Result<u64, Malformed> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                return Err("varint overflows 64 bits");
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes")
    }

    pub(super) fn zigzag(&mut self) -> Result<i64, Malformed> {
        Ok(unzigzag(self.varint()?))
    }

    fn len(&mut self) -> Result<usize, Malformed> {
        let n = self.varint()?;
        if n > self.remaining() as u64 {
            return Err("a length runs past the end");
        }
        Ok(n as usize)
    }

    pub(super) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.len()?;
        self.take(n)
    }

    pub(super) fn blob(&mut self) -> Result<Blob, Malformed> {
        Ok(Blob::new(self.bytes()?))
    }

    pub(super) fn abs_id(&mut self) -> Result<StreamId, Malformed> {
        Ok(StreamId::new(self.varint()?, self.varint()?))
    }

    pub(super) fn id(&mut self, prev: Option<StreamId>) -> Result<StreamId, Malformed> {
        let a = self.varint()?;
        let b = self.varint()?;
        let Some(p) = prev else {
            return Ok(StreamId::new(a, b));
        };
        let ms = p.ms.checked_add(a).ok_or("stream ID overflows")?;
        let seq = if a == 0 {
            p.seq
                .checked_add(1)
                .and_then(|s| s.checked_add(b))
                .ok_or("stream ID overflows")?
        } else {
            b
        };
        Ok(StreamId::new(ms, seq))
    }

    /// A capacity for `count` elements of at least `min_size` bytes each
    /// that the remaining bytes can actually hold (never trust a count).
    pub(super) fn capacity(&self, count: u32, min_size: usize) -> usize {
        (count as usize).min(self.remaining() / min_size.max(1))
    }
}

pub(super) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(super) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

pub(super) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
