//! The text rendering of a key and its value (for people).

use std::io::{self, Write};

use hozon::tools::time::utc_text;
use hozon::types::stream::{StreamId, ENTRIES_READ_INVALID};
use hozon::types::{Stream, Value};

use crate::source::KeyValue;

/// Appends `bytes` escaped and in double quotes (`"` is written `\"`).
pub(super) fn quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

pub(super) fn write_text_key(
    out: &mut impl Write,
    kv: &KeyValue<'_>,
    now_ms: i64,
) -> io::Result<()> {
    let mut line = Vec::with_capacity(128);
    line.extend_from_slice(b"key      ");
    quoted(&mut line, kv.key);
    line.extend_from_slice(
        format!("  (db {})\ntype     {}\n", kv.db, kv.value.type_name()).as_bytes(),
    );
    match kv.expire_ms {
        None => line.extend_from_slice(b"expires  never\n"),
        Some(at) => {
            let left = if at <= now_ms {
                "already expired".to_string()
            } else {
                format!("in {}", duration_text(at - now_ms))
            };
            line.extend_from_slice(
                format!("expires  {} ({at} ms; {left})\n", utc_text(at)).as_bytes(),
            );
        }
    }
    out.write_all(&line)?;
    line.clear();
    match kv.value {
        Value::Str(s) => {
            line.extend_from_slice(b"value    ");
            quoted(&mut line, s);
            line.push(b'\n');
            out.write_all(&line)?;
        }
        Value::List(l) => {
            writeln!(out, "value    {} items", l.len())?;
            for (i, item) in l.iter().enumerate() {
                numbered(out, &mut line, i, &[item])?;
            }
        }
        Value::Set(s) => {
            writeln!(out, "value    {} members (sorted)", s.len())?;
            for (i, m) in sorted_members(s).iter().enumerate() {
                numbered(out, &mut line, i, &[m])?;
            }
        }
        Value::Hash(h) => {
            writeln!(out, "value    {} fields (sorted)", h.len())?;
            for (i, (f, v)) in sorted_pairs(h).into_iter().enumerate() {
                numbered(out, &mut line, i, &[f, v])?;
            }
        }
        Value::ZSet(z) => {
            writeln!(out, "value    {} members (by score)", z.len())?;
            for (i, (m, score)) in z.iter().enumerate() {
                line.clear();
                line.extend_from_slice(format!("  {}) ", i + 1).as_bytes());
                quoted(&mut line, m);
                line.push(b' ');
                line.extend_from_slice(score_text(score).as_bytes());
                line.push(b'\n');
                out.write_all(&line)?;
            }
        }
        Value::Stream(s) => write_text_stream(out, s)?,
    }
    Ok(())
}

/// A positive duration for people: `850 ms`, `12s`, `3h 5m 2s`,
/// `26695d 3h 0m 12s`.
pub(super) fn duration_text(ms: i64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let s = ms / 1000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h}h {m}m {s}s")
    } else if h > 0 {
        format!("{h}h {m}m {s}s")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

/// `  N) "a" "b"` (N from 1).
pub(super) fn numbered(
    out: &mut impl Write,
    line: &mut Vec<u8>,
    i: usize,
    items: &[&[u8]],
) -> io::Result<()> {
    line.clear();
    line.extend_from_slice(format!("  {})", i + 1).as_bytes());
    for item in items {
        line.push(b' ');
        quoted(line, item);
    }
    line.push(b'\n');
    out.write_all(line)
}

pub(super) fn write_text_stream(out: &mut impl Write, s: &Stream) -> io::Result<()> {
    writeln!(
        out,
        "value    {} entries (last id {}, max deleted id {}, entries added {}, {} groups)",
        s.len(),
        s.last_id,
        s.max_deleted_entry_id,
        s.entries_added,
        s.groups.len()
    )?;
    let mut line = Vec::with_capacity(128);
    for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false) {
        line.clear();
        line.extend_from_slice(format!("  {id}").as_bytes());
        for (f, v) in fields.iter() {
            line.push(b' ');
            quoted(&mut line, f);
            line.push(b' ');
            quoted(&mut line, v);
        }
        line.push(b'\n');
        out.write_all(&line)?;
    }
    for (name, g) in &s.groups {
        line.clear();
        line.extend_from_slice(b"group    ");
        quoted(&mut line, name);
        let read = if g.entries_read == ENTRIES_READ_INVALID {
            "unknown".to_string()
        } else {
            g.entries_read.to_string()
        };
        line.extend_from_slice(
            format!(
                "  last delivered id {}, entries read {read}, {} pending, {} consumers\n",
                g.last_id,
                g.pel.len(),
                g.consumers.len()
            )
            .as_bytes(),
        );
        out.write_all(&line)?;
        for (id, p) in &g.pel {
            line.clear();
            line.extend_from_slice(format!("  pending  {id}  consumer ").as_bytes());
            quoted(&mut line, &p.consumer);
            line.extend_from_slice(
                format!(
                    "  delivered {}  count {}\n",
                    utc_text(p.delivery_time_ms),
                    p.delivery_count
                )
                .as_bytes(),
            );
            out.write_all(&line)?;
        }
        for (cname, c) in &g.consumers {
            line.clear();
            line.extend_from_slice(b"  consumer ");
            quoted(&mut line, cname);
            line.extend_from_slice(
                format!(
                    "  seen {}  {} pending\n",
                    utc_text(c.seen_time_ms),
                    c.pel.len()
                )
                .as_bytes(),
            );
            out.write_all(&line)?;
        }
    }
    Ok(())
}

/// A score as text: the shortest decimal that reads back as the same
/// double (exponent form below 1e-5 and from 1e17 on), `inf` / `-inf`,
/// `nan`.
pub(super) fn score_text(score: f64) -> String {
    if score.is_nan() {
        "nan".into()
    } else if score.is_infinite() {
        if score > 0.0 { "inf" } else { "-inf" }.into()
    } else if score == 0.0 || (1e-5..1e17).contains(&score.abs()) {
        format!("{score}")
    } else {
        format!("{score:e}")
    }
}

pub(super) fn sorted_members(s: &hozon::types::Set) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = s.iter().map(|m| m.with_bytes(<[u8]>::to_vec)).collect();
    v.sort_unstable();
    v
}

pub(super) fn sorted_pairs(h: &hozon::types::Hash) -> Vec<(&[u8], &[u8])> {
    let mut v: Vec<(&[u8], &[u8])> = h.iter().collect();
    v.sort_unstable();
    v
}
