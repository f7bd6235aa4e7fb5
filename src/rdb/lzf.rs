//! LZF, the compression RDB files use for strings (liblzf's format, as
//! bundled with Redis).
//!
//! The stream is a sequence of chunks, each starting with a control byte:
//! - `ctrl < 32`: a literal run of `ctrl + 1` bytes that follow;
//! - otherwise a back-reference: length `ctrl >> 5` (7 means "7 plus the
//!   next byte"), plus 2, copied from `offset + 1` bytes back in the output,
//!   where the 13-bit offset is `ctrl & 0x1F` (high bits) and one more byte.
//!
//! The compressor reproduces Redis 7.0's `lzf_compress` (lzfP.h settings:
//! HLOG 16, VERY_FAST, not ULTRA_FAST, the 3-byte hash), so DUMP payloads
//! and RDB files come out byte-identical to Redis's for the same input.

use std::cell::RefCell;

use super::EncodingError;

/// Longest literal run (ctrl 0..=31 means 1..=32 bytes).
const MAX_LITERAL: usize = 1 << 5;
/// Back-references reach at most this far back (13-bit offset, plus one).
const MAX_OFFSET: usize = 1 << 13;
/// Longest back-reference length field (7 + 255, so 264 bytes are copied).
const MAX_REF: usize = (1 << 8) + (1 << 3);
/// Bound on output bytes per input byte: the best chunk is a 3-byte
/// back-reference copying 7 + 255 + 2 = 264 bytes, 88 per byte (one spare).
const MAX_EXPANSION: usize = 89;
/// log2 of the compressor's hash table size (lzfP.h's HLOG).
const HASH_LOG: u32 = 16;
const HASH_SIZE: usize = 1 << HASH_LOG;

/// Decompresses `input`, which must expand to exactly `out_len` bytes.
/// Allocates `out_len` bytes (the caller bounds it); a stream that is
/// truncated, writes past `out_len`, refers before the start of the output
/// or ends short of `out_len` is an error.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, EncodingError> {
    // The best a chunk can do is 3 bytes for a 264-byte back-reference:
    // refuse a declared size the input cannot reach before allocating it.
    if out_len / MAX_EXPANSION > input.len() {
        return Err(cannot_expand(input.len(), out_len));
    }
    // The output is written in place; short copies go as fixed-size moves
    // (no memcpy call per chunk) where the buffers leave room for them.
    let mut out = vec![0u8; out_len];
    let mut op = 0usize;
    let mut ip = 0usize;
    while ip < input.len() {
        let chunk_at = ip;
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < MAX_LITERAL {
            let run = ctrl + 1;
            if run > out_len - op {
                return Err(literal_overruns_output(chunk_at, out_len));
            }
            if run > input.len() - ip {
                return Err(literal_overruns_input(chunk_at));
            }
            if ip + MAX_LITERAL <= input.len() && op + MAX_LITERAL <= out_len {
                // The whole longest run: the bytes past `run` are written
                // again by the chunks that follow.
                let chunk: [u8; MAX_LITERAL] =
                    input[ip..ip + MAX_LITERAL].try_into().expect("32 bytes");
                out[op..op + MAX_LITERAL].copy_from_slice(&chunk);
            } else {
                out[op..op + run].copy_from_slice(&input[ip..ip + run]);
            }
            op += run;
            ip += run;
        } else {
            let truncated = || reference_truncated(chunk_at);
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip).ok_or_else(truncated)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip).ok_or_else(truncated)?);
            ip += 1;
            let back = (((ctrl & 0x1F) << 8) | low) + 1;
            let len = len + 2;
            if len > out_len - op {
                return Err(reference_overruns_output(chunk_at, out_len));
            }
            if back > op {
                return Err(reference_before_start(chunk_at, back, op));
            }
            let from = op - back;
            if back >= COPY_STEP && op + len.next_multiple_of(COPY_STEP) <= out_len {
                // Steps of 16 bytes, each from at least 16 bytes back: every
                // step reads bytes already final, as the byte-by-byte
                // definition does.
                let mut k = 0;
                while k < len {
                    let step: [u8; COPY_STEP] = out[from + k..from + k + COPY_STEP]
                        .try_into()
                        .expect("16 bytes");
                    out[op + k..op + k + COPY_STEP].copy_from_slice(&step);
                    k += COPY_STEP;
                }
            } else if back >= COPY_STEP / 2 && op + len.next_multiple_of(COPY_STEP / 2) <= out_len {
                // The same in steps of 8 (from at least 8 bytes back).
                let mut k = 0;
                while k < len {
                    let step: [u8; COPY_STEP / 2] = out[from + k..from + k + COPY_STEP / 2]
                        .try_into()
                        .expect("8 bytes");
                    out[op + k..op + k + COPY_STEP / 2].copy_from_slice(&step);
                    k += COPY_STEP / 2;
                }
            } else if back >= len {
                // Disjoint: one copy.
                out.copy_within(from..from + len, op);
            } else {
                // Overlapping: the copy repeats the last `back` bytes, byte by
                // byte as the format defines.
                for i in 0..len {
                    out[op + i] = out[from + i];
                }
            }
            op += len;
        }
    }
    if op != out_len {
        return Err(ends_short(input.len(), op, out_len));
    }
    Ok(out)
}

/// What [`decompress`] checks, without writing the output: Ok exactly
/// when `decompress(input, out_len)` is, else the same error.
pub fn check(input: &[u8], out_len: usize) -> Result<(), EncodingError> {
    if out_len / MAX_EXPANSION > input.len() {
        return Err(cannot_expand(input.len(), out_len));
    }
    let mut op = 0usize;
    let mut ip = 0usize;
    while ip < input.len() {
        let chunk_at = ip;
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < MAX_LITERAL {
            let run = ctrl + 1;
            if run > out_len - op {
                return Err(literal_overruns_output(chunk_at, out_len));
            }
            if run > input.len() - ip {
                return Err(literal_overruns_input(chunk_at));
            }
            op += run;
            ip += run;
        } else {
            let truncated = || reference_truncated(chunk_at);
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip).ok_or_else(truncated)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip).ok_or_else(truncated)?);
            ip += 1;
            let back = (((ctrl & 0x1F) << 8) | low) + 1;
            let len = len + 2;
            if len > out_len - op {
                return Err(reference_overruns_output(chunk_at, out_len));
            }
            if back > op {
                return Err(reference_before_start(chunk_at, back, op));
            }
            op += len;
        }
    }
    if op != out_len {
        return Err(ends_short(input.len(), op, out_len));
    }
    Ok(())
}

#[cold]
fn cannot_expand(input_len: usize, out_len: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF data of {input_len} bytes cannot expand to {out_len} bytes"
    ))
}

#[cold]
fn literal_overruns_output(chunk_at: usize, out_len: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF literal run at offset {chunk_at} overruns the {out_len}-byte output"
    ))
}

#[cold]
fn literal_overruns_input(chunk_at: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF literal run at offset {chunk_at} overruns the compressed data"
    ))
}

#[cold]
fn reference_truncated(chunk_at: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF back-reference at offset {chunk_at} is truncated"
    ))
}

#[cold]
fn reference_overruns_output(chunk_at: usize, out_len: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF back-reference at offset {chunk_at} overruns the {out_len}-byte output"
    ))
}

#[cold]
fn reference_before_start(chunk_at: usize, back: usize, op: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF back-reference at offset {chunk_at} points {back} bytes back, \
         before the start of the output ({op} bytes)"
    ))
}

#[cold]
fn ends_short(input_len: usize, op: usize, out_len: usize) -> EncodingError {
    EncodingError::new(format!(
        "LZF data ends at offset {input_len} after {op} of {out_len} bytes"
    ))
}

/// The step of [`decompress`]'s back-reference copies.
const COPY_STEP: usize = 16;

/// The compressor's hash table, kept per thread to avoid a 256 KiB
/// allocation per string. Slots hold `base + position`; a slot below the
/// current call's `base` was written by an earlier call and counts as
/// empty, which makes every call behave as if the table started zeroed.
struct HashTable {
    slots: Box<[u32]>,
    base: u32,
}

thread_local! {
    static TABLE: RefCell<HashTable> = RefCell::new(HashTable {
        slots: vec![0; HASH_SIZE].into_boxed_slice(),
        base: 1,
    });
}

/// The hash slot of the three bytes at `ip` (lzfP.h's VERY_FAST `IDX` over
/// the rolling `hval`; wrapping u32 arithmetic as in C's `unsigned int`).
fn slot(hval: u32) -> usize {
    ((hval >> (3 * 8 - HASH_LOG)).wrapping_sub(hval.wrapping_mul(5)) as usize) & (HASH_SIZE - 1)
}

/// Compresses `input` the way Redis 7.0's `lzf_compress` does and appends
/// the result to `out`, returning true if it fits in `max_len` bytes. The
/// room checks are lzf's own (conservative by up to a few bytes), so the
/// answer is the one Redis gets for the same `max_len`. On false (empty
/// input, `max_len` 0, or no room), `out` is left as it was. Redis passes
/// `max_len = input.len() - 4` and stores the string raw on false.
///
/// Redis leaves its hash table uninitialised (INIT_HTAB 0), so stale slots
/// from earlier calls can occasionally let it find a different (equally
/// valid) match; this compressor behaves as if the table were zeroed, which
/// is what Redis does whenever those stale slots point outside the input.
pub fn compress(input: &[u8], out: &mut Vec<u8>, max_len: usize) -> bool {
    if input.is_empty() || max_len == 0 {
        return false;
    }
    let base_len = out.len();
    let fits = TABLE.with(|table| {
        let mut table = table.borrow_mut();
        compress_with(&mut table, input, out, max_len)
    });
    if !fits {
        out.truncate(base_len);
    }
    fits
}

/// Bytes past `max_len` the compressor's output area has. Its checks keep
/// every write below `max_len` (a literal is written only there, a
/// back-reference only when it and the next control byte's place end
/// there), and the output's size, counting the place kept for the next
/// control byte, at most `max_len + 1`.
const OUT_SLACK: usize = 8;

/// The compressor proper (see [`compress`]); may leave partial output in
/// `out` when it returns false.
///
/// The output is written in place, into zeroed room for `max_len` bytes
/// and a little slack, which is cut to size at the end; `op` is C's
/// `op - out_data`.
fn compress_with(table: &mut HashTable, input: &[u8], out: &mut Vec<u8>, max_len: usize) -> bool {
    let n = input.len();
    // Positions are stored as `base + position` in u32 slots: start over
    // with a cleared table when this input would not fit above the base.
    let Ok(n32) = u32::try_from(n) else {
        return false;
    };
    let base = match table
        .base
        .checked_add(n32)
        .and_then(|end| end.checked_add(1))
    {
        Some(next) => {
            let base = table.base;
            table.base = next;
            base
        }
        None => {
            table.slots.fill(0);
            let Some(next) = n32.checked_add(2) else {
                return false;
            };
            table.base = next;
            1
        }
    };
    let slots: &mut [u32; HASH_SIZE] = (&mut *table.slots)
        .try_into()
        .expect("the table has HASH_SIZE slots");
    let start = out.len();
    out.resize(start + max_len + OUT_SLACK, 0);
    let buf = &mut out[start..];

    let mut lit = 0usize;
    // The first literal run's control byte, written when the run closes.
    let mut op = 1usize;
    let mut ip = 0usize;
    let fits = 'compress: {
        if n >= 3 {
            let mut hval = (u32::from(input[0]) << 8) | u32::from(input[1]);
            while ip < n - 2 {
                hval = (hval << 8) | u32::from(input[ip + 2]);
                let h = slot(hval);
                let stored = slots[h];
                slots[h] = base + ip as u32;
                // A candidate from this call (an older slot wraps to far
                // beyond `ip`), not at position 0 (lzf requires
                // `ref > in_data`), within reach, with the same three
                // bytes (the low 24 bits of `hval` are those at `ip`).
                let r = stored.wrapping_sub(base) as usize;
                let off = ip.wrapping_sub(r).wrapping_sub(1);
                if r > 0
                    && off < MAX_OFFSET
                    && (u32::from(input[r]) << 16 | u32::from(input[r + 1]) << 8)
                        | u32::from(input[r + 2])
                        == hval & 0xFF_FFFF
                {
                    let maxlen = (n - ip - 2).min(MAX_REF);
                    if op + 4 >= max_len && op - usize::from(lit == 0) + 4 >= max_len {
                        break 'compress false;
                    }
                    close_run(buf, &mut op, lit);
                    let len = match_len(input, r, ip, maxlen) - 2;
                    ip += 1;
                    let off_high = (off >> 8) as u8;
                    if len < 7 {
                        buf[op] = off_high + ((len as u8) << 5);
                        op += 1;
                    } else {
                        buf[op] = off_high + (7 << 5);
                        buf[op + 1] = (len - 7) as u8;
                        op += 2;
                    }
                    buf[op] = off as u8;
                    // And the next literal run's control byte.
                    op += 2;
                    lit = 0;
                    ip += len + 1;
                    if ip >= n - 2 {
                        break;
                    }
                    // VERY_FAST: hash the two positions before the new one.
                    ip -= 2;
                    hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
                    for _ in 0..2 {
                        hval = (hval << 8) | u32::from(input[ip + 2]);
                        slots[slot(hval)] = base + ip as u32;
                        ip += 1;
                    }
                } else {
                    if op >= max_len {
                        break 'compress false;
                    }
                    lit += 1;
                    buf[op] = input[ip];
                    op += 1;
                    ip += 1;
                    if lit == MAX_LITERAL {
                        close_run(buf, &mut op, lit);
                        lit = 0;
                        op += 1;
                    }
                }
            }
        }
        if op + 3 > max_len {
            break 'compress false;
        }
        while ip < n {
            lit += 1;
            buf[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LITERAL {
                close_run(buf, &mut op, lit);
                lit = 0;
                op += 1;
            }
        }
        close_run(buf, &mut op, lit);
        op <= max_len
    };
    out.truncate(start + op);
    fits
}

/// The length of the match at `r` for the bytes at `ip` (`r` < `ip`; the
/// first three bytes are known equal), as lzf extends it: up to `maxlen`
/// (at most the bytes left after `ip + 2`), except that when `maxlen` >
/// 16 it compares the first 16 bytes after the three unconditionally, so
/// the result may be up to two bytes past `maxlen` (still within the
/// input). Returns C's `len` at the end of its loop (the length less one).
fn match_len(input: &[u8], r: usize, ip: usize, maxlen: usize) -> usize {
    let mut len = 2usize;
    if maxlen > 16 {
        // Bytes 3..19 after both positions, compared at once: lzf stops at
        // the first that differs.
        let word = |at: usize| u128::from_le_bytes(input[at + 3..at + 19].try_into().expect("16"));
        let differ = word(r) ^ word(ip);
        if differ != 0 {
            return 3 + (differ.trailing_zeros() / 8) as usize;
        }
        len = 18;
    }
    len += 1;
    // Then while `len < maxlen` and the bytes agree: 8 at a time while
    // all 8 are below `maxlen`, then one at a time.
    while len + 8 <= maxlen {
        let word = |at: usize| u64::from_le_bytes(input[at..at + 8].try_into().expect("8"));
        let differ = word(r + len) ^ word(ip + len);
        if differ != 0 {
            return len + (differ.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < maxlen && input[r + len] == input[ip + len] {
        len += 1;
    }
    len
}

/// Ends the literal run of `lit` bytes before `op`: writes its control
/// byte in the place kept for it, or gives that place back if the run is
/// empty.
fn close_run(buf: &mut [u8], op: &mut usize, lit: usize) {
    if lit == 0 {
        *op -= 1;
    } else {
        buf[*op - lit - 1] = (lit - 1) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::QuickCheck;

    /// The compressor as it was before it wrote its output in place and
    /// compared matches a word at a time: the output must not change.
    mod before {
        use super::super::{slot, HashTable, MAX_LITERAL, MAX_OFFSET, MAX_REF};

        /// The compressor proper (see [`compress`]); may leave partial output in
        /// `out` when it returns false.
        pub fn compress_with(
            table: &mut HashTable,
            input: &[u8],
            out: &mut Vec<u8>,
            max_len: usize,
        ) -> bool {
            let n = input.len();
            // Positions are stored as `base + position` in u32 slots: start over
            // with a cleared table when this input would not fit above the base.
            let Ok(n32) = u32::try_from(n) else {
                return false;
            };
            let base = match table
                .base
                .checked_add(n32)
                .and_then(|end| end.checked_add(1))
            {
                Some(next) => {
                    let base = table.base;
                    table.base = next;
                    base
                }
                None => {
                    table.slots.fill(0);
                    let Some(next) = n32.checked_add(2) else {
                        return false;
                    };
                    table.base = next;
                    1
                }
            };
            let slots = &mut table.slots;
            let start = out.len();
            // Output size so far, relative to `start` (C's `op - out_data`).
            let written = |out: &Vec<u8>| out.len() - start;

            let mut lit = 0usize;
            out.push(0); // Placeholder for the first literal run's control byte.
            let mut ip = 0usize;
            if n >= 3 {
                let mut hval = (u32::from(input[0]) << 8) | u32::from(input[1]);
                while ip < n - 2 {
                    hval = (hval << 8) | u32::from(input[ip + 2]);
                    let h = slot(hval);
                    let stored = slots[h];
                    slots[h] = base + ip as u32;
                    // A candidate from this call, not at position 0 (lzf requires
                    // `ref > in_data`), within reach, with the same three bytes.
                    let candidate = stored
                        .checked_sub(base)
                        .map(|r| r as usize)
                        .filter(|&r| r > 0 && r < ip && ip - r - 1 < MAX_OFFSET)
                        .filter(|&r| input[r..r + 3] == input[ip..ip + 3]);
                    if let Some(r) = candidate {
                        let off = ip - r - 1;
                        let maxlen = (n - ip - 2).min(MAX_REF);
                        let op = written(out);
                        if op + 4 >= max_len && op - usize::from(lit == 0) + 4 >= max_len {
                            return false;
                        }
                        close_run(out, lit);
                        // Extend the match the way lzf does, including its quirk of
                        // comparing 16 bytes unconditionally when maxlen > 16 (so a
                        // match may end up to two bytes past maxlen, still within
                        // the input).
                        let mut len = 2usize;
                        'extend: {
                            if maxlen > 16 {
                                for _ in 0..16 {
                                    len += 1;
                                    if input[r + len] != input[ip + len] {
                                        break 'extend;
                                    }
                                }
                            }
                            loop {
                                len += 1;
                                if !(len < maxlen && input[r + len] == input[ip + len]) {
                                    break;
                                }
                            }
                        }
                        len -= 2;
                        ip += 1;
                        let off_high = (off >> 8) as u8;
                        if len < 7 {
                            out.push(off_high + ((len as u8) << 5));
                        } else {
                            out.push(off_high + (7 << 5));
                            out.push((len - 7) as u8);
                        }
                        out.push(off as u8);
                        lit = 0;
                        out.push(0); // Placeholder for the next literal run.
                        ip += len + 1;
                        if ip >= n - 2 {
                            break;
                        }
                        // VERY_FAST: hash the two positions before the new one.
                        ip -= 2;
                        hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
                        for _ in 0..2 {
                            hval = (hval << 8) | u32::from(input[ip + 2]);
                            slots[slot(hval)] = base + ip as u32;
                            ip += 1;
                        }
                    } else {
                        if written(out) >= max_len {
                            return false;
                        }
                        lit += 1;
                        out.push(input[ip]);
                        ip += 1;
                        if lit == MAX_LITERAL {
                            close_run(out, lit);
                            lit = 0;
                            out.push(0);
                        }
                    }
                }
            }
            if written(out) + 3 > max_len {
                return false;
            }
            while ip < n {
                lit += 1;
                out.push(input[ip]);
                ip += 1;
                if lit == MAX_LITERAL {
                    close_run(out, lit);
                    lit = 0;
                    out.push(0);
                }
            }
            close_run(out, lit);
            written(out) <= max_len
        }

        /// Ends the literal run of `lit` bytes at the end of `out`: writes its
        /// control byte into the placeholder, or drops the placeholder if the run
        /// is empty.
        fn close_run(out: &mut Vec<u8>, lit: usize) {
            if lit == 0 {
                out.pop();
            } else {
                let at = out.len() - lit - 1;
                out[at] = (lit - 1) as u8;
            }
        }
    }

    /// `compress` by the compressor `before`, with a table of its own.
    fn compress_before(input: &[u8], out: &mut Vec<u8>, max_len: usize) -> bool {
        if input.is_empty() || max_len == 0 {
            return false;
        }
        let mut table = HashTable {
            slots: vec![0; HASH_SIZE].into_boxed_slice(),
            base: 1,
        };
        let base_len = out.len();
        let fits = before::compress_with(&mut table, input, out, max_len);
        if !fits {
            out.truncate(base_len);
        }
        fits
    }

    #[test]
    fn compress_is_byte_for_byte_what_it_was() {
        let mut rng = crate::rand::Rng::with_seed(0x12f);
        for round in 0..20_000 {
            let len = match round % 4 {
                0 => rng.below(40) as usize,
                1 => rng.below(300) as usize,
                2 => rng.below(3_000) as usize,
                _ => rng.below(20_000) as usize,
            };
            let symbols = [3, 30, 255][rng.index(3)];
            let alphabet = 1 + rng.below(symbols) as u8;
            let mut input: Vec<u8> = Vec::with_capacity(len);
            while input.len() < len {
                match rng.below(4) {
                    // A run of one byte (long references, capped at 264).
                    0 => {
                        let b = rng.below(u64::from(alphabet)) as u8;
                        let run = 1 + rng.below(600) as usize;
                        input.extend(std::iter::repeat_n(b, run));
                    }
                    // A copy of earlier bytes, maybe changed at one place.
                    1 if !input.is_empty() => {
                        let from = rng.index(input.len());
                        let take = (1 + rng.below(80) as usize).min(input.len() - from);
                        let mut copy = input[from..from + take].to_vec();
                        if rng.below(2) == 0 {
                            let at = rng.index(copy.len());
                            copy[at] ^= 1;
                        }
                        input.extend_from_slice(&copy);
                    }
                    _ => {
                        for _ in 0..1 + rng.below(40) {
                            input.push(rng.below(u64::from(alphabet)) as u8);
                        }
                    }
                }
            }
            input.truncate(len);
            let max_len = match rng.below(4) {
                0 => len.saturating_sub(4),
                1 => len + 64,
                2 => rng.below(len as u64 + 10) as usize,
                _ => len,
            };
            let prefix = rng.below(3) as usize;
            let mut ours = vec![7u8; prefix];
            let mut theirs = ours.clone();
            let fits = compress(&input, &mut ours, max_len);
            assert_eq!(
                fits,
                compress_before(&input, &mut theirs, max_len),
                "round {round}: {len} bytes, max_len {max_len}"
            );
            assert!(
                ours == theirs,
                "round {round}: {len} bytes, max_len {max_len}"
            );
            if fits {
                assert_eq!(decompress(&ours[prefix..], len).as_deref(), Ok(&input[..]));
            }
        }
    }

    /// Compresses as Redis's rdbSaveLzfStringObject does (room for len - 4).
    fn redis_compress(input: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        compress(input, &mut out, input.len().saturating_sub(4)).then_some(out)
    }

    /// (input, LZF data) pairs taken from Redis 7.0.15's `DUMP` of a string
    /// set to the input (rdbcompression yes): the payload is 0x00 (string),
    /// 0xC3 (LZF), the compressed and uncompressed lengths, this data, then
    /// the RDB version and CRC.
    fn redis_cases() -> Vec<(Vec<u8>, &'static [u8])> {
        vec![
            // "abcdefghij" × 10: DUMP = \x00\xc3\x12@d + data + \x0a\x00 + CRC.
            (b"abcdefghij".repeat(10), b"\x0aabcdefghija\xe0N\x09\x01ij"),
            // "a" × 1000: the match at position 0 is never used (lzf wants
            // `ref > in_data`), hence two literals; then capped 264-byte
            // back-references.
            (
                vec![b'a'; 1000],
                b"\x01aa\xe0\xff\x00\xe0\xff\x00\xe0\xff\x00\xe0\xc3\x00\x01aa",
            ),
            // ("hello world, " × 30)[..300]
            (
                b"hello world, ".repeat(30)[..300].to_vec(),
                b"\x0dhello world, h\xe0\xff\x0c\xe1\x0b\x10\x01 h",
            ),
            // "ab" × 50 + "xyz" × 20
            (
                [b"ab".repeat(50), b"xyz".repeat(20)].concat(),
                b"\x02aba\xe0X\x01\x02xyz\xe0.\x02\x01yz",
            ),
        ]
    }

    #[test]
    fn compress_matches_redis_dump() {
        for (input, expected) in redis_cases() {
            assert_eq!(redis_compress(&input).as_deref(), Some(expected));
            assert_eq!(decompress(expected, input.len()), Ok(input));
        }
    }

    #[test]
    fn incompressible_input_is_left_raw_like_redis() {
        // Redis 7.0.15 DUMPs bytes 21..121 raw (type 0, 14-bit length 100).
        let input: Vec<u8> = (21..121).collect();
        let mut out = b"prefix".to_vec();
        assert!(!compress(&input, &mut out, input.len() - 4));
        assert_eq!(out, b"prefix", "out is left as it was");
        assert!(!compress(b"", &mut out, 10));
        assert!(!compress(b"aaaaaaaa", &mut out, 0));
        assert_eq!(out, b"prefix");
    }

    #[test]
    fn compress_appends_after_existing_output() {
        let input = b"abcdefghij".repeat(10);
        let mut out = b"head".to_vec();
        assert!(compress(&input, &mut out, 96));
        assert_eq!(&out[..4], b"head");
        assert_eq!(&out[4..], redis_cases()[0].1);
        // Like lzf_compress, it wants some slack beyond the result's size
        // (it checks for room conservatively): 18 bytes need max_len 19 here.
        let size = out.len() - 4;
        let mut out = Vec::new();
        assert!(!compress(&input, &mut out, size));
        assert!(out.is_empty());
        assert!(compress(&input, &mut out, size + 1));
        assert_eq!(out.len(), size);
    }

    #[test]
    fn short_inputs() {
        for input in [&b"a"[..], b"ab", b"abc", b"aaaa"] {
            let mut out = Vec::new();
            assert!(compress(input, &mut out, 100));
            assert_eq!(decompress(&out, input.len()).as_deref(), Ok(input));
        }
        // One literal needs a control byte: 2 bytes for 1, and lzf wants
        // room for 3 more at the end.
        let mut out = Vec::new();
        assert!(!compress(b"a", &mut out, 3));
        assert!(compress(b"a", &mut out, 4));
        assert_eq!(out, b"\x00a");
    }

    #[test]
    fn decompress_handles_overlapping_back_references() {
        // "ab" then a 6-byte copy from 2 back: "abababab".
        assert_eq!(
            decompress(b"\x01ab\x80\x01", 8).as_deref(),
            Ok(&b"abababab"[..])
        );
        // Extended length: 7 + 3 + 2 = 12 bytes copied from 1 back.
        assert_eq!(
            decompress(b"\x00z\xe0\x03\x00", 13).as_deref(),
            Ok(&[b'z'; 13][..])
        );
        assert_eq!(decompress(b"", 0), Ok(Vec::new()));
    }

    #[test]
    fn malformed_data_is_rejected() {
        let err = |data: &[u8], n: usize| decompress(data, n).unwrap_err().0;
        assert_eq!(
            err(b"\x00a\x20\x01", 4),
            "LZF back-reference at offset 2 points 2 bytes back, before the start of the output \
             (1 bytes)"
        );
        assert_eq!(
            err(b"\x04abc", 5),
            "LZF literal run at offset 0 overruns the compressed data"
        );
        assert_eq!(
            err(b"\x02abc", 2),
            "LZF literal run at offset 0 overruns the 2-byte output"
        );
        assert_eq!(
            err(b"\x00a\x20\x00", 2),
            "LZF back-reference at offset 2 overruns the 2-byte output"
        );
        assert_eq!(
            err(b"\x00a", 2),
            "LZF data ends at offset 2 after 1 of 2 bytes"
        );
        assert_eq!(
            err(b"\x00a\x20", 3),
            "LZF back-reference at offset 2 is truncated"
        );
        assert_eq!(
            err(b"\x00a\xe0\x01", 12),
            "LZF back-reference at offset 2 is truncated"
        );
    }

    #[test]
    fn huge_declared_length_fails_fast() {
        // A 1 TiB output from 4 bytes: rejected before allocating.
        let e = decompress(b"\x00a\xe0\xff", 1 << 40).unwrap_err();
        assert!(e.0.contains("cannot expand"));
        let e = decompress(b"", usize::MAX).unwrap_err();
        assert!(e.0.contains("cannot expand"));
        // The best case (264 bytes per 3-byte back-reference) still passes
        // the bound.
        let mut data = b"\x00a".to_vec();
        for _ in 0..100 {
            data.extend_from_slice(b"\xe0\xff\x00");
        }
        assert_eq!(decompress(&data, 1 + 26400), Ok(vec![b'a'; 26401]));
    }

    #[test]
    fn round_trips() {
        fn prop(seed: Vec<u8>, alphabet: u8, repeat: u8) -> bool {
            // Small alphabets and repetition make the data compressible.
            let alphabet = alphabet % 8 + 1;
            let mut input: Vec<u8> = seed.iter().map(|b| b % alphabet).collect();
            let copy = input.clone();
            for _ in 0..repeat % 4 {
                input.extend_from_slice(&copy);
            }
            let mut out = Vec::new();
            if !compress(&input, &mut out, input.len() + 64) {
                return input.is_empty();
            }
            decompress(&out, input.len()) == Ok(input)
        }
        QuickCheck::new()
            .tests(500)
            .quickcheck(prop as fn(Vec<u8>, u8, u8) -> bool);
    }

    #[test]
    fn random_truncated_and_flipped_data_never_panics() {
        fn prop(random: Vec<u8>, out_len: u16, cut: usize, flips: Vec<(usize, u8)>) -> bool {
            let _ = decompress(&random, usize::from(out_len));
            let input = b"the quick brown fox jumps over the lazy dog ".repeat(5);
            let mut good = Vec::new();
            assert!(compress(&input, &mut good, input.len()));
            let _ = decompress(&good[..cut % (good.len() + 1)], input.len());
            let mut flipped = good.clone();
            for (at, mask) in flips {
                let at = at % flipped.len();
                flipped[at] ^= mask;
            }
            let _ = decompress(&flipped, input.len());
            let _ = decompress(&flipped, usize::from(out_len));
            true
        }
        QuickCheck::new()
            .tests(1000)
            .quickcheck(prop as fn(Vec<u8>, u16, usize, Vec<(usize, u8)>) -> bool);
    }

    /// The format's definition, one byte at a time: what `decompress`
    /// (with its block copies) must agree with, errors included.
    fn reference(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut ip = 0;
        while ip < input.len() {
            let ctrl = usize::from(input[ip]);
            ip += 1;
            if ctrl < 32 {
                for _ in 0..=ctrl {
                    out.push(*input.get(ip)?);
                    ip += 1;
                }
            } else {
                let mut len = ctrl >> 5;
                if len == 7 {
                    len += usize::from(*input.get(ip)?);
                    ip += 1;
                }
                let back = (((ctrl & 0x1f) << 8) | usize::from(*input.get(ip)?)) + 1;
                ip += 1;
                let from = out.len().checked_sub(back)?;
                for i in 0..len + 2 {
                    out.push(out[from + i]);
                }
            }
            if out.len() > out_len {
                return None;
            }
        }
        (out.len() == out_len).then_some(out)
    }

    #[test]
    fn decompress_agrees_with_the_byte_by_byte_definition() {
        fn prop(seed: Vec<u8>, repeat: u8, flips: Vec<(usize, u8)>, cut: usize) -> bool {
            // Compressible input (repeats at every distance), then damage.
            let mut input = seed.clone();
            for i in 0..usize::from(repeat) * 8 {
                let b = input.get(i / 3).copied().unwrap_or(i as u8);
                input.push(b);
            }
            input.extend_from_slice(&seed);
            let mut packed = Vec::new();
            if !compress(&input, &mut packed, input.len()) {
                return true;
            }
            if decompress(&packed, input.len()).ok() != Some(input.clone()) {
                return false;
            }
            for (at, mask) in flips {
                let at = at % packed.len();
                packed[at] ^= mask;
            }
            packed.truncate(packed.len() - cut % 3);
            [input.len(), input.len() + 7, input.len().saturating_sub(5)]
                .iter()
                .all(|&n| decompress(&packed, n).ok() == reference(&packed, n))
        }
        QuickCheck::new()
            .tests(3000)
            .quickcheck(prop as fn(Vec<u8>, u8, Vec<(usize, u8)>, usize) -> bool);
    }

    #[test]
    fn check_agrees_with_decompress_errors_included() {
        fn prop(seed: Vec<u8>, repeat: u8, flips: Vec<(usize, u8)>, cut: usize) -> bool {
            let mut input = seed.clone();
            for i in 0..usize::from(repeat) * 8 {
                let b = input.get(i / 3).copied().unwrap_or(i as u8);
                input.push(b);
            }
            input.extend_from_slice(&seed);
            let mut packed = Vec::new();
            if !compress(&input, &mut packed, input.len()) {
                packed = seed.clone();
            }
            for (at, mask) in flips {
                if !packed.is_empty() {
                    let at = at % packed.len();
                    packed[at] ^= mask;
                }
            }
            packed.truncate(packed.len() - cut % 3usize.min(packed.len() + 1));
            [
                0,
                1,
                input.len(),
                input.len() + 7,
                input.len().saturating_sub(5),
            ]
            .iter()
            .all(|&n| {
                let full = decompress(&packed, n)
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                full == check(&packed, n).map_err(|e| e.to_string())
            })
        }
        QuickCheck::new()
            .tests(3000)
            .quickcheck(prop as fn(Vec<u8>, u8, Vec<(usize, u8)>, usize) -> bool);
    }
}
