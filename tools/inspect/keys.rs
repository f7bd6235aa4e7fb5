//! `keys`: one line per key (database, key, type, encoding, bytes,
//! element count, expiry) of any input, streamed while an RDB file or a
//! dump.hoz is walked, so memory stays bounded whatever the file's size
//! (an AOF is replayed first: see `source`).

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::process::ExitCode;

use crate::source::{self, FactsError, KeyFacts};
use crate::{KeysArgs, EXIT_PROBLEMS, EXIT_USAGE_OR_IO};
use hozon::tools::report::escape_key;
use hozon::tools::time::utc_text;

/// Which keys to print.
#[derive(Debug, Default)]
pub struct Filter {
    /// Only this database.
    pub db: Option<usize>,
    /// Only this logical type (`string`, `list`, ...).
    pub kind: Option<String>,
    /// Only keys matching this Redis glob pattern.
    pub pattern: Option<Vec<u8>>,
    /// Only keys matching this regular expression (anywhere in the key).
    pub regex: Option<regex::bytes::Regex>,
    /// Only records of at least this many bytes.
    pub min_bytes: u64,
    /// Some(true): only keys with an expiry; Some(false): only without.
    pub expires: Option<bool>,
    /// Stop after this many keys printed.
    pub limit: Option<u64>,
}

impl Filter {
    fn accepts(&self, k: &KeyFacts<'_>) -> bool {
        self.db.is_none_or(|db| db == k.db)
            && self.kind.as_deref().is_none_or(|t| t == k.logical_type)
            && k.bytes >= self.min_bytes
            && self.expires.is_none_or(|e| e == k.expire_ms.is_some())
            && self
                .pattern
                .as_deref()
                // KEYS treats a lone `*` as "all keys", the empty key too.
                .is_none_or(|p| p == b"*" || hozon::tools::glob_matches(p, k.key, false))
            && self.regex.as_ref().is_none_or(|r| r.is_match(k.key))
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
    let input = match source::open(path) {
        Ok(i) => i,
        Err(source::Failure::Damaged(m)) => return Outcome::Damaged(m),
        Err(source::Failure::Io(m)) => return Outcome::Failed(m),
    };
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
    let result = input.for_each_facts(&mut |k| {
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
        Err(FactsError::Damaged(_, m)) => Outcome::Damaged(m),
        Err(FactsError::Io(m)) => Outcome::Failed(m),
        Ok(()) => Outcome::Done,
    }
}

fn print_key(out: &mut impl Write, k: &KeyFacts<'_>, json: bool) -> io::Result<()> {
    let encoding = &k.encoding;
    let key = escape_key(k.key);
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
            k.offset.map_or_else(|| "null".to_string(), |o| o.to_string()),
            k.bytes,
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
            k.db, key, k.logical_type, encoding, k.bytes, elements
        )
    }
}

/// Runs `keys`: the command line's filter, then [`keys`]; the exit code.
pub fn run(args: &KeysArgs, json: bool) -> ExitCode {
    let regex = match args.regex.as_deref().map(regex::bytes::Regex::new) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            let _ = writeln!(io::stderr(), "hozon-inspect: --regex: {e}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
    };
    let filter = Filter {
        db: args.db,
        regex,
        kind: args.kind.clone(),
        pattern: args.pattern.as_ref().map(|p| p.as_bytes().to_vec()),
        min_bytes: args.min_size,
        expires: match (args.expires, args.no_expires) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        limit: args.limit,
    };
    match keys(&args.path, &filter, json) {
        Outcome::Done => ExitCode::SUCCESS,
        Outcome::Damaged(message) => {
            let _ = writeln!(
                io::stderr(),
                "hozon-inspect: the input is damaged: {message}"
            );
            ExitCode::from(EXIT_PROBLEMS)
        }
        Outcome::Failed(message) => {
            let _ = writeln!(io::stderr(), "hozon-inspect: {message}");
            ExitCode::from(EXIT_USAGE_OR_IO)
        }
    }
}
