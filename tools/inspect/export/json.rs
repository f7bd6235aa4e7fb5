//! The JSON rendering of a key and its value (`--json`, `--format jsonl`),
//! shared by the value-model path and the RDB fast path (`rdb_json`).

use std::io::{self, Write};

use hozon::types::stream::{StreamId, ENTRIES_READ_INVALID};
use hozon::types::{Stream, Value};

use super::text::{sorted_members, sorted_pairs};
use crate::source::KeyValue;

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes `json_bytes` escapes: outside printable ASCII, `\\` and `"`
/// (a table: one load per byte instead of three comparisons).
pub(super) const ESCAPED: [bool; 256] = {
    let mut t = [true; 256];
    let mut b = 0x20;
    while b <= 0x7e {
        t[b] = b == b'\\' as usize || b == b'"' as usize;
        b += 1;
    }
    t
};

/// Appends `bytes` escaped (see the module doc) as a JSON string.
pub(super) fn json_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let plain = plain_run(bytes);
    out.extend_from_slice(&bytes[..plain]);
    let mut rest = &bytes[plain..];
    // Then, after each escaped byte, the next run of printable bytes in
    // one copy.
    while let Some((&b, tail)) = rest.split_first() {
        match b {
            // `\` escaped to `\\`, each of them JSON-escaped.
            b'\\' => out.extend_from_slice(b"\\\\\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            // `\xHH`, its backslash JSON-escaped (no formatting machinery:
            // binary values can be all escapes).
            _ => out.extend_from_slice(&[
                b'\\',
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
        }
        let plain = plain_run(tail);
        out.extend_from_slice(&tail[..plain]);
        rest = &tail[plain..];
    }
    out.push(b'"');
}

/// The length of the run of bytes at the start of `bytes` that
/// `json_bytes` copies as they are: eight at a time while no byte of the
/// word is below 0x20, 0x7f or above, `"` or `\\`, then byte by byte.
pub(super) fn plain_run(bytes: &[u8]) -> usize {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let mut at = 0;
    if bytes.len() < 8 {
        // Padded with spaces (plain): one word check for a short element.
        let mut padded = [b' '; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        if plain_word(u64::from_le_bytes(padded)) {
            return bytes.len();
        }
    } else {
        while at + 8 <= bytes.len() && plain_word(word(at)) {
            at += 8;
        }
        // The last (possibly overlapping) word covers the tail.
        if at + 8 > bytes.len() && plain_word(word(bytes.len() - 8)) {
            return bytes.len();
        }
    }
    at + bytes[at..]
        .iter()
        .position(|&b| ESCAPED[usize::from(b)])
        .unwrap_or(bytes.len() - at)
}

/// No byte of the 8 in `w` is one `json_bytes` escapes: none below 0x20,
/// 0x7f or above, `"` or `\\` (exact: the zero-byte tests have no false
/// negatives).
#[inline(always)]
pub(super) fn plain_word(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0;
    !(below_space
        || w & HIGH != 0
        || has_zero(w ^ (ONES * 0x7f))
        || has_zero(w ^ (ONES * u64::from(b'"')))
        || has_zero(w ^ (ONES * u64::from(b'\\'))))
}

/// Appends text (not binary data) as a JSON string.
pub(super) fn json_text(out: &mut Vec<u8>, text: &str) {
    json_bytes(out, text.as_bytes());
}

/// A score as a JSON value: a number when finite, else `"inf"`,
/// `"-inf"` (or `"nan"`, which no loader produces).
pub(super) fn json_score(out: &mut Vec<u8>, score: f64) {
    // Formatted straight into the buffer (no `String` per score); the same
    // text as `score_text`, which the unit test `json_score_matches_score_text`
    // checks.
    // Whole numbers (the common case: listpacks store them as integers)
    // without the float formatter; Display writes them the same way.
    // (`as i64` truncates: cheaper than `fract`, a libm call on baseline
    // x86-64.)
    let whole = |x: f64| x.abs() < 9_007_199_254_740_992.0 && x as i64 as f64 == x;
    if score != 0.0 && whole(score) {
        json_int(out, score as i64);
    } else if score.abs() < SIXTEENTHS_EXACT_BELOW && !whole(score) && whole(score * 16.0) {
        json_sixteenths(out, score);
    } else if score.is_nan() {
        out.extend_from_slice(b"\"nan\"");
    } else if score.is_infinite() {
        out.extend_from_slice(if score > 0.0 { b"\"inf\"" } else { b"\"-inf\"" });
    } else if score == 0.0 || (1e-5..1e17).contains(&score.abs()) {
        let _ = write!(out, "{score}");
    } else {
        let _ = write!(out, "{score:e}");
    }
}

/// A key object up to its value: `{"db":..,"key":..,"type":..,
/// "expire_ms":..,"value":` (numbers written into the buffer directly,
/// no `String` per key).
pub(super) fn json_key_head(
    b: &mut Vec<u8>,
    db: usize,
    key: &[u8],
    type_name: &str,
    expire_ms: Option<i64>,
) {
    b.extend_from_slice(b"{\"db\":");
    match i64::try_from(db) {
        Ok(n) => json_int(b, n),
        Err(_) => {
            let _ = write!(b, "{db}");
        }
    }
    b.extend_from_slice(b",\"key\":");
    json_bytes(b, key);
    b.extend_from_slice(b",\"type\":\"");
    b.extend_from_slice(type_name.as_bytes());
    b.extend_from_slice(b"\",\"expire_ms\":");
    match expire_ms {
        Some(at) => json_int(b, at),
        None => b.extend_from_slice(b"null"),
    }
    b.extend_from_slice(b",\"value\":");
}

/// An integer as a JSON number.
pub(super) fn json_int(b: &mut Vec<u8>, n: i64) {
    b.extend_from_slice(hozon::types::num::format_i64(n, &mut [0u8; 20]));
}

/// Below this magnitude a multiple of 1/16 is printed by Display as its
/// exact decimal (at most 4 fraction digits): doubles there are at most
/// 2^-12 apart, closer than any decimal with fewer digits comes.
pub(super) const SIXTEENTHS_EXACT_BELOW: f64 = 1_099_511_627_776.0; // 2^40

/// A non-integral multiple of 1/16 below [`SIXTEENTHS_EXACT_BELOW`], as
/// Display writes it: sign, whole part, `.`, the fraction's digits without
/// trailing zeros.
pub(super) fn json_sixteenths(out: &mut Vec<u8>, score: f64) {
    let sixteenths = (score.abs() * 16.0) as u64;
    if score < 0.0 {
        out.push(b'-');
    }
    json_int(out, (sixteenths / 16) as i64);
    // k/16 = k * 625 / 10000: four digits, trailing zeros dropped.
    let mut frac = (sixteenths % 16) * 625;
    let mut digits = 4;
    while frac.is_multiple_of(10) {
        frac /= 10;
        digits -= 1;
    }
    out.push(b'.');
    for place in (0..digits).rev() {
        out.push(b'0' + (frac / 10u64.pow(place) % 10) as u8);
    }
}

/// Writes the buffer when it has grown, so a large value streams out.
pub(super) fn spill(out: &mut impl Write, buf: &mut Vec<u8>) -> io::Result<()> {
    if buf.len() >= 1 << 16 {
        out.write_all(buf)?;
        buf.clear();
    }
    Ok(())
}

/// One key as a JSON object (no newline): `db`, `key`, `type`,
/// `expire_ms` (null without), `value`.
pub(super) fn write_json_key(out: &mut impl Write, kv: &KeyValue<'_>) -> io::Result<()> {
    let mut b = Vec::with_capacity(256);
    json_key_head(&mut b, kv.db, kv.key, kv.value.type_name(), kv.expire_ms);
    match kv.value {
        Value::Str(s) => json_bytes(&mut b, s),
        Value::List(l) => {
            b.push(b'[');
            for (i, item) in l.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                json_bytes(&mut b, item);
                spill(out, &mut b)?;
            }
            b.push(b']');
        }
        Value::Set(s) => {
            b.push(b'[');
            for (i, m) in sorted_members(s).iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                json_bytes(&mut b, m);
                spill(out, &mut b)?;
            }
            b.push(b']');
        }
        Value::Hash(h) => {
            b.push(b'[');
            for (i, (f, v)) in sorted_pairs(h).into_iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                b.push(b'[');
                json_bytes(&mut b, f);
                b.push(b',');
                json_bytes(&mut b, v);
                b.push(b']');
                spill(out, &mut b)?;
            }
            b.push(b']');
        }
        Value::ZSet(z) => {
            b.push(b'[');
            for (i, (m, score)) in z.iter().enumerate() {
                if i > 0 {
                    b.push(b',');
                }
                b.push(b'[');
                json_bytes(&mut b, m);
                b.push(b',');
                json_score(&mut b, score);
                b.push(b']');
                spill(out, &mut b)?;
            }
            b.push(b']');
        }
        Value::Stream(s) => write_json_stream(out, &mut b, s)?,
    }
    b.push(b'}');
    out.write_all(&b)
}

pub(super) fn write_json_stream(
    out: &mut impl Write,
    b: &mut Vec<u8>,
    s: &Stream,
) -> io::Result<()> {
    b.extend_from_slice(b"{\"entries\":[");
    for (i, (id, fields)) in s.range(StreamId::MIN, StreamId::MAX, false).enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(format!("[\"{id}\",[").as_bytes());
        for (j, (f, v)) in fields.iter().enumerate() {
            if j > 0 {
                b.push(b',');
            }
            json_bytes(b, f);
            b.push(b',');
            json_bytes(b, v);
        }
        b.extend_from_slice(b"]]");
        spill(out, b)?;
    }
    b.extend_from_slice(
        format!(
            "],\"last_id\":\"{}\",\"max_deleted_id\":\"{}\",\"entries_added\":{},\"groups\":[",
            s.last_id, s.max_deleted_entry_id, s.entries_added
        )
        .as_bytes(),
    );
    for (i, (name, g)) in s.groups.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"{\"name\":");
        json_bytes(b, name);
        b.extend_from_slice(format!(",\"last_id\":\"{}\",\"entries_read\":", g.last_id).as_bytes());
        if g.entries_read == ENTRIES_READ_INVALID {
            b.extend_from_slice(b"null");
        } else {
            b.extend_from_slice(g.entries_read.to_string().as_bytes());
        }
        b.extend_from_slice(b",\"pending\":[");
        for (j, (id, p)) in g.pel.iter().enumerate() {
            if j > 0 {
                b.push(b',');
            }
            b.extend_from_slice(format!("{{\"id\":\"{id}\",\"consumer\":").as_bytes());
            json_bytes(b, &p.consumer);
            b.extend_from_slice(
                format!(
                    ",\"delivery_time_ms\":{},\"delivery_count\":{}}}",
                    p.delivery_time_ms, p.delivery_count
                )
                .as_bytes(),
            );
            spill(out, b)?;
        }
        b.extend_from_slice(b"],\"consumers\":[");
        for (j, (cname, c)) in g.consumers.iter().enumerate() {
            if j > 0 {
                b.push(b',');
            }
            b.extend_from_slice(b"{\"name\":");
            json_bytes(b, cname);
            b.extend_from_slice(
                format!(",\"seen_time_ms\":{},\"pending\":[", c.seen_time_ms).as_bytes(),
            );
            for (k, id) in c.pel.iter().enumerate() {
                if k > 0 {
                    b.push(b',');
                }
                b.extend_from_slice(format!("\"{id}\"").as_bytes());
            }
            b.extend_from_slice(b"]}");
            spill(out, b)?;
        }
        b.extend_from_slice(b"]}");
    }
    b.extend_from_slice(b"]}");
    Ok(())
}
