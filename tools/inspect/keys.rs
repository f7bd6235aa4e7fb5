//! `keys`: one line per key of an RDB file (database, key, type,
//! encoding, record bytes, element count, expiry), streamed while the
//! file is walked, so memory stays bounded whatever the file's size.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::Path;

use hozon::rdb::{self, reader};

use crate::info::{utc_text, Input};

/// Which keys to print.
#[derive(Debug, Default)]
pub struct Filter {
    /// Only this database.
    pub db: Option<usize>,
    /// Only this logical type (`string`, `list`, ...).
    pub kind: Option<String>,
    /// Only keys matching this Redis glob pattern.
    pub pattern: Option<Vec<u8>>,
    /// Only records of at least this many bytes.
    pub min_bytes: u64,
    /// Some(true): only keys with an expiry; Some(false): only without.
    pub expires: Option<bool>,
    /// Stop after this many keys printed.
    pub limit: Option<u64>,
}

impl Filter {
    fn accepts(&self, k: &reader::KeyInfo<'_>) -> bool {
        self.db.is_none_or(|db| db == k.db)
            && self.kind.as_deref().is_none_or(|t| t == k.logical_type)
            && k.record_bytes >= self.min_bytes
            && self.expires.is_none_or(|e| e == k.expire_ms.is_some())
            && self
                .pattern
                .as_deref()
                // KEYS treats a lone `*` as "all keys", the empty key too.
                .is_none_or(|p| p == b"*" || hozon::glob::matches(p, &k.key, false))
    }
}

/// How `keys` ended: the process exit code's cause.
pub enum Outcome {
    /// Every key was read (or the limit was reached).
    Done,
    /// The file is damaged: the message names the offset (exit 1).
    Damaged(String),
    /// Usage or I/O problem (exit 2).
    Failed(String),
}

/// A key for display: printable ASCII but `\` as is, `\` as `\\`, every
/// other byte as `\xHH`. The escaped text is ASCII and reversible.
pub fn escape_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// A JSON string literal of ASCII text.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Prints the keys of `path` that pass `filter` to stdout.
pub fn keys(path: &Path, filter: &Filter, json: bool) -> Outcome {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return Outcome::Failed(format!("{}: {e}", path.display())),
    };
    if meta.is_dir() {
        return Outcome::Failed("keys is not supported for this format yet".into());
    }
    let input = match Input::open(path) {
        Ok(i) => i,
        Err(e) => return Outcome::Failed(e),
    };
    let data = input.bytes();
    if !reader::is_rdb(data) {
        return Outcome::Failed("keys is not supported for this format yet".into());
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut write_error: Option<io::Error> = None;
    if !json {
        if let Err(e) = writeln!(
            out,
            "{:>3}  {:<32}  {:<6}  {:<18}  {:>10}  {:>8}  ttl",
            "db", "key", "type", "encoding", "bytes", "elements"
        ) {
            write_error = Some(e);
        }
    }
    let mut printed = 0u64;
    let result = reader::scan_keys(data, &mut |k| {
        if write_error.is_some() || filter.limit.is_some_and(|l| printed >= l) {
            return ControlFlow::Break(());
        }
        if !filter.accepts(k) {
            return ControlFlow::Continue(());
        }
        printed += 1;
        if let Err(e) = print_key(&mut out, k, json) {
            write_error = Some(e);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    let flushed = out.flush();
    if let Some(e) = write_error.or(flushed.err()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // The reader went away (`| head`): nothing more to say.
            return Outcome::Done;
        }
        return Outcome::Failed(format!("writing the output: {e}"));
    }
    match result {
        Err(e) => Outcome::Damaged(e.to_string()),
        Ok(s) if s.checksum.is_some() && s.len < data.len() => Outcome::Damaged(format!(
            "at offset {}: {} bytes after the end of the RDB image",
            s.len,
            data.len() - s.len
        )),
        Ok(_) => Outcome::Done,
    }
}

fn print_key(out: &mut impl Write, k: &reader::KeyInfo<'_>, json: bool) -> io::Result<()> {
    let encoding = rdb::kind::name(k.type_byte)
        .map_or_else(|| format!("type {}", k.type_byte), str::to_string);
    let key = escape_key(&k.key);
    if json {
        let elements = k
            .elements
            .map_or_else(|| "null".to_string(), |n| n.to_string());
        let (expire_ms, utc) = match k.expire_ms {
            Some(ms) => (ms.to_string(), json_string(&utc_text(ms))),
            None => ("null".to_string(), "null".to_string()),
        };
        writeln!(
            out,
            "{{\"db\":{},\"key\":{},\"type\":\"{}\",\"encoding\":\"{}\",\"offset\":{},\"bytes\":{},\"elements\":{},\"expire_ms\":{},\"expire_utc\":{}}}",
            k.db,
            json_string(&key),
            k.logical_type,
            encoding,
            k.offset,
            k.record_bytes,
            elements,
            expire_ms,
            utc
        )
    } else {
        let elements = k
            .elements
            .map_or_else(|| "-".to_string(), |n| n.to_string());
        let ttl = k.expire_ms.map_or_else(|| "-".to_string(), utc_text);
        writeln!(
            out,
            "{:>3}  {:<32}  {:<6}  {:<18}  {:>10}  {:>8}  {ttl}",
            k.db, key, k.logical_type, encoding, k.record_bytes, elements
        )
    }
}
