//! HyperLogLog strings in Redis 7.0's exact representation.
//!
//! A HyperLogLog is a plain string value: a 16-byte header (`HYLL`, the
//! encoding byte, 3 unused bytes, the cached cardinality as 8 bytes little
//! endian whose top bit marks it stale) followed by either the dense
//! encoding (16384 registers of 6 bits, 12288 bytes) or the sparse one
//! (ZERO, XZERO and VAL opcodes). Every operation here reproduces the
//! bytes Redis's `hyperloglog.c` writes, including where it tolerates or
//! rejects damaged strings, so a string moves between Redis and hozon
//! (DUMP/RESTORE, RDB files) and counts the same on both sides.
//!
//! Pure code: no keys, no clients, no I/O.

/// Length of the header: magic, encoding, 3 unused bytes, cached cardinality.
pub const HDR_SIZE: usize = 16;
/// Register index bits.
pub const P: u32 = 14;
/// Hash bits left for the run of zeroes.
pub const Q: u32 = 64 - P;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Length of a dense HyperLogLog string (header + 6-bit registers).
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * 6).div_ceil(8);
/// The encoding byte of the dense representation.
pub const DENSE: u8 = 0;
/// The encoding byte of the sparse representation.
pub const SPARSE: u8 = 1;
/// The seed Redis hashes elements with.
pub const SEED: u64 = 0xadc8_3b19;
/// Largest value a sparse VAL opcode holds; larger ones force the dense
/// representation.
pub const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// `hll-sparse-max-bytes`' default.
pub const DEFAULT_SPARSE_MAX_BYTES: u64 = 3000;

/// The error for a damaged HyperLogLog.
pub const INVALID_ERR: &str = "INVALIDOBJ Corrupted HLL object detected";
/// The error for a string that is not a HyperLogLog.
pub const NOT_HLL_ERR: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

const REGISTER_MAX: u32 = 63;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A HyperLogLog string found damaged while it was read or changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash64A (MurmurHash2, 64-bit), endian-neutral as Redis has it.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element hashes to and the length of its `000…1`
/// pattern (1 to Q+1), Redis's `hllPatLen`.
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, SEED);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------
// Dense registers.

/// Register `i` of the dense `registers` (12288 bytes).
pub fn dense_get(registers: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u32::from(registers[byte]);
    let b1 = u32::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

/// Sets register `i` of the dense `registers` to `val` (at most 63).
pub fn dense_put(registers: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u32::from(val);
    registers[byte] &= !(REGISTER_MAX << fb) as u8;
    registers[byte] |= (v << fb) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !(REGISTER_MAX >> (8 - fb)) as u8;
        *next |= (v >> (8 - fb)) as u8;
    }
}

/// Raises register `i` to `count` when lower; true when it changed.
fn dense_raise(registers: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(registers, i) {
        dense_put(registers, i, count);
        true
    } else {
        false
    }
}

/// Raises register `i` of the dense string `s` to `count` when lower;
/// true when it changed.
pub fn dense_set_max(s: &mut [u8], i: usize, count: u8) -> bool {
    dense_raise(&mut s[HDR_SIZE..], i, count)
}

// ---------------------------------------------------------------------------
// Sparse opcodes.

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn zero_len(b: u8) -> usize {
    usize::from(b & 0x3f) + 1
}

/// XZERO's run length; `next` is the byte after (0 past the end, as the
/// terminator Redis's strings carry reads).
fn xzero_len(b: u8, next: u8) -> usize {
    ((usize::from(b & 0x3f) << 8) | usize::from(next)) + 1
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len as u8 - 1)) | 0x80
}

/// Appends a ZERO or XZERO opcode for a run of `len` zero registers.
fn push_zero_run(seq: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        seq.push((l >> 8) as u8 | 0x40);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push((len - 1) as u8);
    }
}

/// The byte at `i`, or 0 past the end (the string's terminator).
fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Strings.

/// A new, empty HyperLogLog: sparse, one XZERO covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR_SIZE + 2);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        push_zero_run(&mut s, run);
        left -= run;
    }
    s
}

/// True when `s` passes Redis's HyperLogLog check (`isHLLObjectOrReply`):
/// long enough for the header, the magic, a known encoding, and the exact
/// length for the dense one. Sparse opcodes are checked only as used.
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR_SIZE
        && &s[..4] == b"HYLL"
        && s[4] <= SPARSE
        && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The encoding byte (`DENSE` or `SPARSE` for a string [`is_hll`] accepts).
pub fn encoding(s: &[u8]) -> u8 {
    s[4]
}

/// The cached cardinality, when it is valid.
pub fn cached_count(s: &[u8]) -> Option<u64> {
    if s[15] & 0x80 != 0 {
        return None;
    }
    Some(u64::from_le_bytes(s[8..16].try_into().expect("8 bytes")))
}

/// Stores `count` as the cached cardinality (marking it valid).
pub fn set_cached_count(s: &mut [u8], count: u64) {
    s[8..16].copy_from_slice(&count.to_le_bytes());
}

/// Marks the cached cardinality stale (the other bytes are kept).
pub fn invalidate_cache(s: &mut [u8]) {
    s[15] |= 0x80;
}

/// Walks the opcodes of the sparse `s`, calling `f(first, len, value)`
/// for every run (zero runs included). Err when a run would go past the
/// last register or the runs do not cover them all: the check of the
/// reference server, whose `hyperloglog.c` carries the fix for
/// CVE-2025-32023 (an opcode past the registers is damage, where the
/// original 7.0.15 code stopped at a VAL and let a trailing one pass).
fn walk_sparse(s: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let mut idx = 0usize;
    let mut p = HDR_SIZE;
    while p < s.len() {
        let b = s[p];
        let (len, value) = if is_zero(b) {
            p += 1;
            (zero_len(b), 0)
        } else if is_xzero(b) {
            p += 2;
            (xzero_len(b, byte_at(s, p - 1)), 0)
        } else {
            p += 1;
            (val_len(b), val_value(b))
        };
        if idx + len > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, len, value);
        idx += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// The dense form of the sparse `s` (Redis's `hllSparseToDense`): the
/// header copied but for the encoding. Err when the opcodes do not cover
/// exactly the registers.
pub fn sparse_to_dense(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(&s[..HDR_SIZE]);
    dense[4] = DENSE;
    let registers = &mut dense[HDR_SIZE..];
    walk_sparse(s, |first, len, value| {
        for i in first..first + len {
            dense_put(registers, i, value);
        }
    })?;
    Ok(dense)
}

/// Converts `s` to the dense representation in place when it is sparse;
/// true when it was converted.
pub fn to_dense(s: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if s[4] == DENSE {
        return Ok(false);
    }
    *s = sparse_to_dense(s)?;
    Ok(true)
}

/// What locating and rewriting a sparse register came to.
enum SparseOutcome {
    Updated,
    Unchanged,
    Invalid,
    Promote,
}

/// Raises register `index` of the sparse `s` to `count` (Redis's
/// `hllSparseSet`): the opcode covering it is split or rewritten in place,
/// adjacent equal VALs merged, and the string converted to dense when
/// `count` exceeds what VAL holds or the string would outgrow `max_bytes`.
/// True when the register changed; Err when the string is damaged.
pub fn sparse_set(
    s: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> Result<bool, Corrupt> {
    let outcome = if count > SPARSE_VAL_MAX_VALUE {
        SparseOutcome::Promote
    } else {
        let mut len = s.len();
        // The terminator (read by an XZERO cut at the end) and the room
        // a split needs.
        s.resize(len + 8, 0);
        let outcome = sparse_set_in_place(s, &mut len, index, count, max_bytes);
        s.truncate(len);
        outcome
    };
    match outcome {
        SparseOutcome::Updated => {
            invalidate_cache(s);
            Ok(true)
        }
        SparseOutcome::Unchanged => Ok(false),
        SparseOutcome::Invalid => Err(Corrupt),
        SparseOutcome::Promote => {
            let mut dense = sparse_to_dense(s)?;
            dense_raise(&mut dense[HDR_SIZE..], index, count);
            *s = dense;
            Ok(true)
        }
    }
}

/// [`sparse_set`]'s work on a buffer with spare bytes past `*len`.
fn sparse_set_in_place(
    s: &mut [u8],
    len: &mut usize,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> SparseOutcome {
    let mut end = *len;
    // Step 1: find the opcode covering the register.
    let mut p = HDR_SIZE;
    let mut first = 0usize;
    let mut prev = None;
    let mut span = 0usize;
    while p < end {
        let b = s[p];
        let mut oplen = 1;
        if is_zero(b) {
            span = zero_len(b);
        } else if is_val(b) {
            span = val_len(b);
        } else {
            span = xzero_len(b, s[p + 1]);
            oplen = 2;
        }
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return SparseOutcome::Invalid;
    }
    let op = s[p];
    let next = if is_xzero(op) { p + 2 } else { p + 1 };
    let next = (next < end).then_some(next);
    let runlen = if is_zero(op) {
        zero_len(op)
    } else if is_xzero(op) {
        xzero_len(op, s[p + 1])
    } else {
        val_len(op)
    };

    // Step 2: the trivial cases, else the split sequence.
    let mut rewritten = false;
    if is_val(op) {
        if val_value(op) >= count {
            return SparseOutcome::Unchanged;
        }
        if runlen == 1 {
            s[p] = val_op(count, 1);
            rewritten = true;
        }
    }
    if !rewritten && is_zero(op) && runlen == 1 {
        s[p] = val_op(count, 1);
        rewritten = true;
    }
    if !rewritten {
        let mut seq = Vec::with_capacity(5);
        let last = first + span - 1;
        if is_val(op) {
            let current = val_value(op);
            if index != first {
                seq.push(val_op(current, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(current, last - index));
            }
        } else {
            if index != first {
                push_zero_run(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zero_run(&mut seq, last - index);
            }
        }
        // Step 3: put the sequence in place of the opcode.
        let oldlen: isize = if is_xzero(op) { 2 } else { 1 };
        let delta = seq.len() as isize - oldlen;
        if delta > 0 && (*len as u64).saturating_add(delta as u64) > max_bytes {
            return SparseOutcome::Promote;
        }
        if delta != 0 {
            if let Some(next) = next {
                s.copy_within(next..end, next.wrapping_add_signed(delta));
            }
        }
        *len = len.wrapping_add_signed(delta);
        s[p..p + seq.len()].copy_from_slice(&seq);
        end = end.wrapping_add_signed(delta);
    }

    // Step 4: merge adjacent VALs of the same value, scanning up to five
    // opcodes from the one before.
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while p < end {
        if scan == 0 {
            break;
        }
        scan -= 1;
        let b = s[p];
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < end && is_val(s[p + 1]) {
            let (v1, v2) = (val_value(b), val_value(s[p + 1]));
            if v1 == v2 {
                let merged = val_len(b) + val_len(s[p + 1]);
                if merged <= SPARSE_VAL_MAX_LEN {
                    s[p + 1] = val_op(v1, merged);
                    s.copy_within(p + 1..end, p);
                    *len -= 1;
                    end -= 1;
                    continue;
                }
            }
        }
        p += 1;
    }
    SparseOutcome::Updated
}

/// Adds `element` to the HyperLogLog `s` (which [`is_hll`] accepted):
/// true when a register changed (the caller invalidates the cache).
pub fn add(s: &mut Vec<u8>, element: &[u8], max_bytes: u64) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    match s[4] {
        DENSE => Ok(dense_raise(&mut s[HDR_SIZE..], index, count)),
        SPARSE => sparse_set(s, index, count, max_bytes),
        _ => Err(Corrupt),
    }
}

/// Raises `max[i]` to register `i` of `s` (Redis's `hllMerge`). Err when a
/// sparse `s` does not cover exactly the registers; `max` may be changed
/// then.
pub fn merge_into(max: &mut [u8; REGISTERS], s: &[u8]) -> Result<(), Corrupt> {
    if s[4] == DENSE {
        let registers = &s[HDR_SIZE..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(registers, i));
        }
        return Ok(());
    }
    walk_sparse(s, |first, len, value| {
        for m in &mut max[first..first + len] {
            *m = (*m).max(value);
        }
    })?;
    Ok(())
}

/// The register histogram of `s`; Err for a sparse string whose runs do
/// not add up to the registers.
fn histogram(s: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut hist = [0u32; 64];
    if s[4] == DENSE {
        let registers = &s[HDR_SIZE..];
        for i in 0..REGISTERS {
            hist[usize::from(dense_get(registers, i))] += 1;
        }
        return Ok(hist);
    }
    walk_sparse(s, |_, len, value| hist[usize::from(value)] += len as u32)?;
    Ok(hist)
}

/// The cardinality estimated from the registers of `s`, ignoring the
/// cache (Redis's `hllCount`).
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(s)?))
}

/// The cardinality of registers held one per byte (PFCOUNT of several
/// keys).
pub fn count_raw(max: &[u8; REGISTERS]) -> u64 {
    let mut hist = [0u32; 64];
    for &r in max.iter() {
        hist[usize::from(r & 63)] += 1;
    }
    estimate(&hist)
}

/// Ertl's sigma ("New cardinality estimation algorithms for HyperLogLog
/// sketches", arXiv:1702.01284), with Redis's loop.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

/// Ertl's tau, with Redis's loop.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// Redis 7.0's estimator from the register histogram.
fn estimate(hist: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(hist[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(hist[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(hist[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// PFDEBUG DECODE's text for a sparse `s`: `z:<len>`, `Z:<len>` and
/// `v:<value>,<len>` separated by spaces.
pub fn decode_sparse(s: &[u8]) -> String {
    let mut out = Vec::new();
    let mut p = HDR_SIZE;
    while p < s.len() {
        let b = s[p];
        if is_zero(b) {
            out.push(format!("z:{}", zero_len(b)));
            p += 1;
        } else if is_xzero(b) {
            out.push(format!("Z:{}", xzero_len(b, byte_at(s, p + 1))));
            p += 2;
        } else {
            out.push(format!("v:{},{}", val_value(b), val_len(b)));
            p += 1;
        }
    }
    out.join(" ")
}

/// PFSELFTEST: the register accessors against a byte array, then the
/// dense and the sparse representation fed the same elements up to 10
/// million, agreeing and within six standard errors at every power of
/// ten. `seed` varies the elements; Err carries the failure (Redis's
/// `TESTFAILED …` text).
pub fn self_test(seed: u64, max_bytes: u64) -> Result<(), String> {
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = (next() >> 32) as u8 & 63;
            *b = r;
            dense_put(&mut dense[HDR_SIZE..], i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let val = dense_get(&dense[HDR_SIZE..], i);
            if val != b {
                return Err(format!(
                    "TESTFAILED Register {i} should be {b} but is {val}"
                ));
            }
        }
    }

    dense[HDR_SIZE..].fill(0);
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let base = next();
    for j in 1..=10_000_000u64 {
        let element = (j ^ base).to_le_bytes();
        let (index, run) = pattern(&element);
        dense_raise(&mut dense[HDR_SIZE..], index, run);
        // A damaged string cannot arise here; the count check catches any.
        let _ = add(&mut sparse, &element, max_bytes);
        if j != checkpoint {
            continue;
        }
        if j < max_bytes / 2 && sparse[4] != SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let dense_count = count(&dense).unwrap_or(0);
        if Ok(dense_count) != count(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = (checkpoint as i64 - dense_count as i64).unsigned_abs();
        let mut maxerr = (relerr * 6.0 * checkpoint as f64).ceil() as u64;
        if j == 10 {
            maxerr = 1;
        }
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_known_values() {
        // The empty string hashes to the seed mixed alone.
        let mut h = SEED;
        h ^= h >> 47;
        h = h.wrapping_mul(0xc6a4_a793_5bd1_e995);
        h ^= h >> 47;
        assert_eq!(murmur64a(b"", SEED), h);
        // Lengths across the 8-byte block boundary all differ.
        let hashes: Vec<u64> = (0..20).map(|n| murmur64a(&vec![b'a'; n], SEED)).collect();
        let mut unique = hashes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), hashes.len());
    }

    #[test]
    fn new_hll_is_one_xzero() {
        let s = new_sparse();
        assert_eq!(s.len(), 18);
        assert!(is_hll(&s));
        assert_eq!(decode_sparse(&s), "Z:16384");
        assert_eq!(count(&s), Ok(0));
        assert_eq!(cached_count(&s), Some(0));
    }

    #[test]
    fn dense_registers_round_trip_without_touching_neighbours() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
        dense_put(&mut regs, 7, 0);
        assert_eq!(dense_get(&regs, 6), 6);
        assert_eq!(dense_get(&regs, 8), 8);
    }

    #[test]
    fn sparse_and_dense_agree_on_registers_and_count() {
        let mut sparse = new_sparse();
        let mut dense = sparse_to_dense(&sparse).unwrap();
        for n in 0..2000u32 {
            let e = n.to_string();
            add(&mut sparse, e.as_bytes(), 1 << 20).unwrap();
            add(&mut dense, e.as_bytes(), 1 << 20).unwrap();
        }
        assert_eq!(encoding(&sparse), SPARSE);
        assert_eq!(
            sparse_to_dense(&sparse).unwrap()[HDR_SIZE..],
            dense[HDR_SIZE..]
        );
        let c = count(&sparse).unwrap();
        assert_eq!(Ok(c), count(&dense));
        assert!((1900..2100).contains(&c), "{c}");
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &sparse).unwrap();
        assert_eq!(count_raw(&max), c);
    }

    #[test]
    fn sparse_promotes_past_max_bytes_and_big_values() {
        let mut s = new_sparse();
        let mut n = 0u32;
        while encoding(&s) == SPARSE {
            assert!(s.len() <= 300);
            add(&mut s, n.to_string().as_bytes(), 300).unwrap();
            n += 1;
        }
        assert_eq!(s.len(), DENSE_SIZE);
        let mut s = new_sparse();
        assert_eq!(sparse_set(&mut s, 5, 33, 3000), Ok(true));
        assert_eq!(encoding(&s), DENSE);
        assert_eq!(dense_get(&s[HDR_SIZE..], 5), 33);
    }

    #[test]
    fn sparse_split_and_merge_opcodes() {
        let mut s = new_sparse();
        assert_eq!(sparse_set(&mut s, 100, 3, 3000), Ok(true));
        assert_eq!(decode_sparse(&s), "Z:100 v:3,1 Z:16283");
        assert_eq!(sparse_set(&mut s, 101, 3, 3000), Ok(true));
        assert_eq!(decode_sparse(&s), "Z:100 v:3,2 Z:16282");
        assert_eq!(sparse_set(&mut s, 101, 2, 3000), Ok(false));
        assert_eq!(sparse_set(&mut s, 0, 1, 3000), Ok(true));
        assert_eq!(decode_sparse(&s), "v:1,1 Z:99 v:3,2 Z:16282");
        assert_eq!(cached_count(&s), None);
    }

    #[test]
    fn damaged_sparse_strings_are_refused() {
        let mut s = new_sparse();
        s.truncate(17);
        assert_eq!(count(&s), Err(Corrupt));
        assert!(sparse_to_dense(&s).is_err());
        let mut s = new_sparse();
        s.push(0x00); // one register too many
        assert_eq!(count(&s), Err(Corrupt));
        let mut max = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &s), Err(Corrupt));
        // A trailing VAL past the registers is damage everywhere.
        let mut s = new_sparse();
        s.push(val_op(2, 1));
        assert_eq!(merge_into(&mut max, &s), Err(Corrupt));
        assert!(sparse_to_dense(&s).is_err());
        assert_eq!(count(&s), Err(Corrupt));
        let mut empty = new_sparse();
        empty.truncate(HDR_SIZE);
        assert_eq!(add(&mut empty, b"x", 3000), Err(Corrupt));
    }

    #[test]
    fn header_checks() {
        assert!(!is_hll(b"HYLL"));
        let mut s = new_sparse();
        s[4] = 2;
        assert!(!is_hll(&s));
        s[4] = DENSE;
        assert!(!is_hll(&s));
        let mut s = new_sparse();
        set_cached_count(&mut s, 42);
        assert_eq!(cached_count(&s), Some(42));
        invalidate_cache(&mut s);
        assert_eq!(cached_count(&s), None);
        assert_eq!(s[8], 42);
    }
}
