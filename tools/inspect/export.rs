//! `get` and `export`: the values of an input's keys, for people (text),
//! for scripts (JSON, JSON Lines), as the RESP commands that recreate them
//! (`redis-cli --pipe`), or converted into another file format (a new
//! dump.hoz or RDB file).
//!
//! Every input format is read through [`crate::source`], one key at a
//! time: a value is built when its key is reached and dropped once it is
//! written, so memory holds one value (plus its encoded form) at a time,
//! not the data set (an AOF input excepted: it is replayed first, see
//! `source`).
//!
//! Binary-safe escaping (keys, fields, members, values, IDs' fields,
//! group and consumer names alike, in text and JSON): bytes 0x20-0x7e as
//! themselves except `\`, written `\\`; every other byte `\xHH` (two
//! lowercase hex digits). It is the `keys` subcommand's, it is reversible,
//! and the result is ASCII, so a JSON string holds it with only `"` and `\`
//! JSON-escaped.

use std::ffi::OsString;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use hozon::persist::io::{Io, RealIo};
use hozon::persist::rewrite::commands_for;
use hozon::persist::snapshot::{self, BlockBuilder, FileWriter, HeaderInfo};
use hozon::rdb::file::{RdbFile, RecordEncoder};
use hozon::rdb::writer::Encoder;
use hozon::types::stream::{StreamId, ENTRIES_READ_INVALID};
use hozon::types::{Stream, Value};

use hozon::rdb::{self, reader};
use hozon::Config;

use hozon::tools::time::utc_text;

use crate::info::Input;
use crate::rdb_json;
use crate::source::{self, Failure, KeyValue};

const EXIT_DAMAGED: u8 = 1;
const EXIT_USAGE_OR_IO: u8 = 2;

/// The `databases` a converted dump.hoz header records (informational: a
/// loading server checks every key's database against its own
/// configuration, not against this number).
const HOZ_HEADER_DATABASES: usize = 16;

/// Arguments of `get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The input: a dump.hoz, an RDB file, an AOF, a Redis 7 AOF manifest
    /// or its appendonlydir, or `-` for stdin.
    pub path: PathBuf,
    /// The key (its bytes as given; with --escaped, in the escaped form
    /// `keys` prints: `\\` for a backslash, `\xHH` for any byte).
    pub key: OsString,
    /// The key's database.
    #[arg(long, default_value_t = 0)]
    pub db: usize,
    /// KEY is written in the escaped form (`\\`, `\xHH`).
    #[arg(long)]
    pub escaped: bool,
    /// Print the RESP commands that recreate the key (as `export --format
    /// resp` does, with an absolute PEXPIREAT).
    #[arg(long)]
    pub resp: bool,
}

/// Output formats of `export` (besides the file conversions of `--to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// For people: one block per key, as `get` prints it.
    Text,
    /// One JSON document: an array of key objects.
    Json,
    /// JSON Lines: one key object per line.
    Jsonl,
    /// RESP commands for `redis-cli --pipe`.
    Resp,
}

/// File formats `export --to` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FileFormat {
    /// hozon's dump.hoz snapshot.
    Hoz,
    /// A Redis 7.0 RDB file (version 10).
    Rdb,
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The input: a dump.hoz, an RDB file, an AOF, a Redis 7 AOF manifest
    /// or its appendonlydir, or `-` for stdin.
    pub path: PathBuf,
    /// Output format (default: text, or jsonl with --json).
    #[arg(long, value_enum, conflicts_with = "to")]
    pub format: Option<ExportFormat>,
    /// Write the keys as a new file of this format instead (needs --output).
    #[arg(long, value_enum, requires = "output")]
    pub to: Option<FileFormat>,
    /// The file --to writes (written under a temporary name, fsynced, then
    /// renamed; never the input; an existing file only with --force).
    #[arg(long, short = 'o', value_name = "FILE", requires = "to")]
    pub output: Option<PathBuf>,
    /// Replace an existing --output file.
    #[arg(long, requires = "to")]
    pub force: bool,
    /// RESP: expiries as PEXPIRE with the milliseconds left at export
    /// time instead of PEXPIREAT; keys already expired are left out (their
    /// count goes to stderr).
    #[arg(long)]
    pub relative_expiry: bool,
    /// RESP: a DEL before each key's commands, so keys already in the
    /// target are replaced rather than merged into.
    #[arg(long)]
    pub replace: bool,
    /// Leave out keys whose expiry has passed (at export time).
    #[arg(long)]
    pub skip_expired: bool,
    /// Only keys of this database.
    #[arg(long)]
    pub db: Option<usize>,
    /// Only keys of this type.
    #[arg(long = "type", value_parser = ["string", "list", "hash", "set", "zset", "stream"])]
    pub kind: Option<String>,
    /// Only keys matching this Redis glob pattern (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes).
    #[arg(long = "match", value_name = "GLOB")]
    pub pattern: Option<String>,
    /// At most N keys (those that pass the other filters first).
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// JSON of an RDB file through the value model (each value built as a
    /// hozon value first) instead of straight from its encodings: the
    /// reference the tests compare the fast path with.
    #[arg(long, hide = true)]
    pub value_model: bool,
}

// ---------------------------------------------------------------------------
// get

/// Runs `get`: prints one key's value (text, `--json` one object or
/// `null`, `--resp` its commands). A missing key is not an error: text
/// `(nil)`, JSON `null`, RESP nothing; exit 0. The walk stops at the key,
/// so damage after it goes unnoticed; damage before it exits 1.
pub fn run_get(args: &GetArgs, json: bool) -> ExitCode {
    let key = match key_bytes(&args.key, args.escaped) {
        Ok(k) => k,
        Err(m) => return fail(EXIT_USAGE_OR_IO, &m),
    };
    let src = match source::open(&args.path) {
        Ok(s) => s,
        Err(e) => return failure_exit(&e),
    };
    let now_ms = hozon::engine::now_ms();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut found = false;
    let mut write_error: Option<io::Error> = None;
    let mut print = |kv: KeyValue<'_>| -> ControlFlow<()> {
        if kv.db != args.db || kv.key != key.as_slice() {
            return ControlFlow::Continue(());
        }
        found = true;
        let written = if args.resp {
            let mut selected = None;
            write_resp(&mut out, &kv, &mut selected, RespOptions::default(), now_ms).map(|_| ())
        } else if json {
            write_json_key(&mut out, &kv).and_then(|()| out.write_all(b"\n"))
        } else {
            write_text_key(&mut out, &kv, now_ms)
        };
        if let Err(e) = written {
            write_error = Some(e);
        }
        ControlFlow::Break(())
    };
    let direct = if src.format() == source::Format::Rdb && args.path.as_os_str() != "-" {
        // Only the named key's value is built: the others are skipped.
        get_from_rdb(&args.path, args.db, &key, now_ms, &mut print)
    } else {
        None
    };
    let walked = match direct {
        Some(result) => result,
        None => src.for_each(&mut print),
    };
    if write_error.is_none() && !found && walked.is_ok() {
        let missing: &[u8] = if args.resp {
            b""
        } else if json {
            b"null\n"
        } else {
            b"(nil)\n"
        };
        if let Err(e) = out.write_all(missing) {
            write_error = Some(e);
        }
    }
    finish(out, write_error, walked)
}

/// Finds `key` of database `db` in an RDB file without building any other
/// value ([`reader::scan_keys`] skips them), decodes its value and hands
/// it to `f`. A module value cannot be built: it is a usage error. None
/// for a Valkey file: a record's type byte alone does not say how to
/// decode it there (type 22 is Valkey's HASH_2 but a Redis 7.4 release
/// candidate's hash), so the caller walks the file instead.
fn get_from_rdb(
    path: &Path,
    db: usize,
    key: &[u8],
    now_ms: i64,
    f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>,
) -> Option<Result<(), Failure>> {
    let input = match Input::open(path) {
        Ok(i) => i,
        Err(m) => return Some(Err(Failure::Io(m))),
    };
    let data = input.bytes();
    if matches!(reader::read_header(data), Ok((_, true, _))) {
        return None;
    }
    Some(decode_one(data, db, key, now_ms, f))
}

fn decode_one(
    data: &[u8],
    db: usize,
    key: &[u8],
    now_ms: i64,
    f: &mut dyn FnMut(KeyValue<'_>) -> ControlFlow<()>,
) -> Result<(), Failure> {
    let mut hit: Option<(u64, u8, Option<i64>)> = None;
    let scanned = reader::scan_keys(data, &mut |k| {
        if k.db == db && k.key.as_ref() == key {
            hit = Some((k.offset, k.type_byte, k.expire_ms));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if let Err(e) = scanned {
        return Err(Failure::Damaged(e.to_string()));
    }
    let Some((offset, type_byte, expire_ms)) = hit else {
        return Ok(());
    };
    if reader::logical_type(type_byte) == "module" {
        return Err(Failure::Io(format!(
            "the value of this key is a module's ({}): it cannot be decoded",
            rdb::kind::name(type_byte).unwrap_or("module")
        )));
    }
    let damaged = |what: String| Failure::Damaged(format!("the record at offset {offset}: {what}"));
    let value_at = usize::try_from(offset)
        .ok()
        .and_then(|o| Some(o + 1 + rdb_string_len(data.get(o + 1..)?)?))
        .ok_or_else(|| damaged("the key's length cannot be read".into()))?;
    let options = reader::Options {
        limits: Config::default().limits,
        databases: usize::MAX,
        skip_expired_before_ms: None,
        now_ms,
    };
    let (value, _) = reader::decode_value(&data[value_at..], type_byte, &options)
        .map_err(|e| damaged(e.to_string()))?;
    let Some(value) = value else {
        // An empty collection: loaders drop it, as Redis does.
        return Ok(());
    };
    let _ = f(KeyValue {
        db,
        key,
        value: &value,
        expire_ms,
    });
    Ok(())
}

/// Bytes an RDB-encoded string takes at the start of `data`: its length
/// prefix (6-, 14-, 32- or 64-bit), or an integer encoding (1, 2 or 4
/// bytes), or an LZF header (compressed and plain lengths) and the
/// compressed bytes. None when `data` ends first.
fn rdb_string_len(data: &[u8]) -> Option<usize> {
    /// A length: (value, bytes it took), or for the special encodings
    /// (value, bytes, true).
    fn length(data: &[u8]) -> Option<(u64, usize, bool)> {
        let first = *data.first()?;
        Some(match first >> 6 {
            0 => (u64::from(first & 0x3f), 1, false),
            1 => (
                (u64::from(first & 0x3f) << 8) | u64::from(*data.get(1)?),
                2,
                false,
            ),
            2 if first == 0x80 => (
                u64::from(u32::from_be_bytes(data.get(1..5)?.try_into().ok()?)),
                5,
                false,
            ),
            2 if first == 0x81 => (
                u64::from_be_bytes(data.get(1..9)?.try_into().ok()?),
                9,
                false,
            ),
            2 => return None,
            _ => (u64::from(first & 0x3f), 1, true),
        })
    }
    let (n, head, special) = length(data)?;
    let total = if !special {
        (head as u64).checked_add(n)?
    } else {
        match n {
            0 => 2,
            1 => 3,
            2 => 5,
            3 => {
                let (clen, a, _) = length(data.get(head..)?)?;
                let (_, b, _) = length(data.get(head + a..)?)?;
                ((head + a + b) as u64).checked_add(clen)?
            }
            _ => return None,
        }
    };
    let total = usize::try_from(total).ok()?;
    (total <= data.len()).then_some(total)
}

/// The key named on the command line.
fn key_bytes(arg: &OsString, escaped: bool) -> Result<Vec<u8>, String> {
    use std::os::unix::ffi::OsStrExt;
    let raw = arg.as_os_str().as_bytes();
    if escaped {
        unescape(raw)
    } else {
        Ok(raw.to_vec())
    }
}

/// Undoes the escaping (`\\`, `\xHH`; a backslash before any other byte
/// stands for that byte, as `keys`' readers expect).
fn unescape(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            out.push(text[i]);
            i += 1;
            continue;
        }
        match text.get(i + 1) {
            Some(b'x') => {
                let hex = text
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad \\x escape at byte {i} of the key"))?;
                out.push(hex);
                i += 4;
            }
            Some(&b) => {
                out.push(b);
                i += 2;
            }
            None => return Err("the key ends with a lone backslash".into()),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// export

/// Which keys `export` hands on.
pub(crate) struct Filter<'a> {
    db: Option<usize>,
    kind: Option<&'a str>,
    pattern: Option<&'a [u8]>,
    skip_expired: bool,
    now_ms: i64,
}

impl Filter<'_> {
    fn accepts(&self, kv: &KeyValue<'_>) -> bool {
        self.accepts_parts(kv.db, kv.key, kv.value.type_name(), kv.expire_ms)
    }

    /// [`Filter::accepts`] from what a key record says before its value is
    /// read (`type_name` as TYPE reports it).
    pub(crate) fn accepts_parts(
        &self,
        db: usize,
        key: &[u8],
        type_name: &str,
        expire_ms: Option<i64>,
    ) -> bool {
        self.db.is_none_or(|d| d == db)
            && self.kind.is_none_or(|t| t == type_name)
            && !(self.skip_expired && expire_ms.is_some_and(|at| at <= self.now_ms))
            && self
                .pattern
                // KEYS treats a lone `*` as "all keys", the empty key too.
                .is_none_or(|p| p == b"*" || hozon::glob::matches(p, key, false))
    }
}

/// Runs `export`.
pub fn run_export(args: &ExportArgs, json: bool) -> ExitCode {
    if args.relative_expiry || args.replace {
        let format = args.format.unwrap_or(ExportFormat::Text);
        if format != ExportFormat::Resp {
            return fail(
                EXIT_USAGE_OR_IO,
                "--relative-expiry and --replace apply to --format resp only",
            );
        }
    }
    let now_ms = hozon::engine::now_ms();
    let filter = Filter {
        db: args.db,
        kind: args.kind.as_deref(),
        pattern: args.pattern.as_deref().map(str::as_bytes),
        // A relative expiry cannot express a time that has passed.
        skip_expired: args.skip_expired || args.relative_expiry,
        now_ms,
    };
    if let (Some(to), Some(output)) = (args.to, args.output.as_deref()) {
        return convert(args, to, output, &filter, json);
    }
    let format = args.format.unwrap_or(if json {
        ExportFormat::Jsonl
    } else {
        ExportFormat::Text
    });
    let src = match source::open(&args.path) {
        Ok(s) => s,
        Err(e) => return failure_exit(&e),
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut write_error: Option<io::Error> = None;
    let mut written = 0u64;
    let mut expired = 0u64;
    let mut selected = None;
    let resp = RespOptions {
        relative: args.relative_expiry,
        replace: args.replace,
    };
    if format == ExportFormat::Json {
        if let Err(e) = out.write_all(b"[") {
            write_error = Some(e);
        }
    }
    // JSON of an RDB file: the parallel path straight from the encodings
    // (rdb_json), which hands over to the walk below only after damage.
    let mut skip = 0u64;
    let mut finished = false;
    if matches!(format, ExportFormat::Json | ExportFormat::Jsonl)
        && src.format() == source::Format::Rdb
        && args.limit.is_none()
        && !args.value_model
        && write_error.is_none()
        && rdb_json::applies(src.data())
    {
        let exported = rdb_json::export(
            &src,
            &filter,
            format == ExportFormat::Jsonl,
            now_ms,
            &mut out,
        );
        written = exported.written;
        match exported.outcome {
            rdb_json::Outcome::Done => finished = true,
            rdb_json::Outcome::WriteError(e) => {
                write_error = Some(e);
                finished = true;
            }
            rdb_json::Outcome::Resume(handed) => skip = handed,
        }
    }
    let walked = if finished {
        Ok(())
    } else {
        src.for_each(&mut |kv| {
            if skip > 0 {
                // Written (or filtered out) by the fast path already.
                skip -= 1;
                return ControlFlow::Continue(());
            }
            if write_error.is_some() || args.limit.is_some_and(|l| written >= l) {
                return ControlFlow::Break(());
            }
            if !filter.accepts(&kv) {
                if args.relative_expiry && kv.expire_ms.is_some_and(|at| at <= now_ms) {
                    expired += 1;
                }
                return ControlFlow::Continue(());
            }
            let result = match format {
                ExportFormat::Text => {
                    let sep: &[u8] = if written > 0 { b"\n" } else { b"" };
                    out.write_all(sep)
                        .and_then(|()| write_text_key(&mut out, &kv, now_ms))
                }
                ExportFormat::Jsonl => {
                    write_json_key(&mut out, &kv).and_then(|()| out.write_all(b"\n"))
                }
                ExportFormat::Json => {
                    let sep: &[u8] = if written > 0 { b",\n" } else { b"\n" };
                    out.write_all(sep)
                        .and_then(|()| write_json_key(&mut out, &kv))
                }
                ExportFormat::Resp => {
                    write_resp(&mut out, &kv, &mut selected, resp, now_ms).map(|_| ())
                }
            };
            written += 1;
            match result {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    write_error = Some(e);
                    ControlFlow::Break(())
                }
            }
        })
    };
    if format == ExportFormat::Json && write_error.is_none() {
        // The document is closed even after damage, so it stays parseable.
        if let Err(e) = out.write_all(b"\n]\n") {
            write_error = Some(e);
        }
    }
    if expired > 0 && write_error.is_none() {
        let _ = out.flush();
        let _ = writeln!(
            io::stderr(),
            "hozon-inspect: {expired} keys already expired were left out (--relative-expiry)"
        );
    }
    finish(out, write_error, walked)
}

/// Flushes the output and turns the outcome into the exit code: a closed
/// pipe ends quietly (0), another write error is an I/O error (2), damage
/// is reported after the output (1).
fn finish(
    mut out: impl Write,
    write_error: Option<io::Error>,
    walked: Result<(), Failure>,
) -> ExitCode {
    let flushed = out.flush();
    drop(out);
    if let Some(e) = write_error.or(flushed.err()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            // The reader went away (`| head`): nothing more to say.
            return ExitCode::SUCCESS;
        }
        return fail(EXIT_USAGE_OR_IO, &format!("writing the output: {e}"));
    }
    match walked {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure_exit(&e),
    }
}

fn failure_exit(e: &Failure) -> ExitCode {
    match e {
        Failure::Damaged(m) => fail(EXIT_DAMAGED, &format!("the input is damaged: {m}")),
        Failure::Io(m) => fail(EXIT_USAGE_OR_IO, m),
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    let _ = writeln!(io::stderr(), "hozon-inspect: {message}");
    ExitCode::from(code)
}

// ---------------------------------------------------------------------------
// --to hoz|rdb

/// Where a converted file goes, checked before anything is read.
fn check_output(input: &Path, output: &Path, force: bool) -> Result<(), String> {
    if output.is_dir() {
        return Err(format!("{} is a directory", output.display()));
    }
    if output.exists() {
        let same = input.as_os_str() != "-"
            && matches!(
                (std::fs::canonicalize(input), std::fs::canonicalize(output)),
                (Ok(a), Ok(b)) if a == b
            );
        if same {
            return Err(format!(
                "{} is the input; write the conversion elsewhere",
                output.display()
            ));
        }
        if !force {
            return Err(format!("{} exists (--force replaces it)", output.display()));
        }
    }
    Ok(())
}

/// A file being written under a temporary name in the output's directory.
enum Writer {
    // Boxed: the snapshot writer is several hundred bytes.
    Hoz {
        file: Box<FileWriter>,
        builder: BlockBuilder,
    },
    Rdb {
        file: RdbFile,
        records: RecordEncoder,
    },
}

impl Writer {
    fn create(to: FileFormat, temp: &Path, io: Arc<dyn Io>, now_ms: i64) -> Result<Writer, String> {
        Ok(match to {
            FileFormat::Hoz => Writer::Hoz {
                file: Box::new(
                    FileWriter::create(io, temp, HeaderInfo::new(now_ms, HOZ_HEADER_DATABASES))
                        .map_err(|e| e.to_string())?,
                ),
                builder: BlockBuilder::new(),
            },
            FileFormat::Rdb => Writer::Rdb {
                file: RdbFile::create(io, temp)?,
                records: RecordEncoder::with_header(Encoder::default(), now_ms, 0, false),
            },
        })
    }

    fn push(&mut self, kv: &KeyValue<'_>) -> Result<(), String> {
        match self {
            Writer::Hoz { file, builder } => {
                for block in builder.push(kv.db, kv.key, kv.value, kv.expire_ms) {
                    let buf = file.write_block(block).map_err(|e| e.to_string())?;
                    builder.recycle(buf);
                }
            }
            Writer::Rdb { file, records } => {
                // RESIZEDB is a sizing hint; the counts are not known
                // while streaming, and 0 makes loaders size as they go.
                records.push(kv.db, kv.key, kv.value, kv.expire_ms, |_| (0, 0));
                if let Some(chunk) = records.take_full() {
                    file.write(&chunk)?;
                }
            }
        }
        Ok(())
    }

    /// Completes the file (fsynced, still under its temporary name).
    /// Returns its length.
    fn finish(self) -> Result<u64, String> {
        match self {
            Writer::Hoz {
                mut file,
                mut builder,
            } => {
                if let Some(block) = builder.finish() {
                    file.write_block(block).map_err(|e| e.to_string())?;
                }
                let summary = file.finish(builder.stats()).map_err(|e| e.to_string())?;
                Ok(summary.file_len)
            }
            Writer::Rdb {
                mut file,
                mut records,
            } => {
                file.write(&records.take())?;
                file.finish(true)
            }
        }
    }
}

fn convert(
    args: &ExportArgs,
    to: FileFormat,
    output: &Path,
    filter: &Filter<'_>,
    json: bool,
) -> ExitCode {
    if let Err(m) = check_output(&args.path, output, args.force) {
        return fail(EXIT_USAGE_OR_IO, &m);
    }
    let src = match source::open(&args.path) {
        Ok(s) => s,
        Err(e) => return failure_exit(&e),
    };
    let Some(file_name) = output.file_name().and_then(|n| n.to_str()) else {
        return fail(
            EXIT_USAGE_OR_IO,
            &format!("{}: not a file name", output.display()),
        );
    };
    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let io: Arc<dyn Io> = Arc::new(RealIo);
    let temp = snapshot::temp_path(dir, file_name);
    let mut writer = match Writer::create(to, &temp, Arc::clone(&io), filter.now_ms) {
        Ok(w) => w,
        Err(m) => return fail(EXIT_USAGE_OR_IO, &m),
    };
    let mut write_error: Option<String> = None;
    let mut keys = 0u64;
    let walked = src.for_each(&mut |kv| {
        if args.limit.is_some_and(|l| keys >= l) {
            return ControlFlow::Break(());
        }
        if !filter.accepts(&kv) {
            return ControlFlow::Continue(());
        }
        if let Err(m) = writer.push(&kv) {
            write_error = Some(m);
            return ControlFlow::Break(());
        }
        keys += 1;
        ControlFlow::Continue(())
    });
    if let Some(m) = write_error {
        // Dropping the writer removes the temporary file.
        return fail(EXIT_USAGE_OR_IO, &m);
    }
    if let Err(e) = walked {
        // Nothing is written for a damaged input: a partial copy under
        // the output's name would pass for the whole data set.
        drop(writer);
        return match e {
            Failure::Damaged(m) => fail(
                EXIT_DAMAGED,
                &format!(
                    "the input is damaged: {m}; {} was not written",
                    output.display()
                ),
            ),
            Failure::Io(m) => fail(EXIT_USAGE_OR_IO, &m),
        };
    }
    let bytes = match writer.finish() {
        Ok(b) => b,
        Err(m) => return fail(EXIT_USAGE_OR_IO, &m),
    };
    if let Err(e) = snapshot::commit(io.as_ref(), &temp, output) {
        return fail(EXIT_USAGE_OR_IO, &e.to_string());
    }
    let format = match to {
        FileFormat::Hoz => "dump.hoz",
        FileFormat::Rdb => "rdb",
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let path_text = output.display().to_string();
    let printed = if json {
        let mut line = Vec::new();
        line.extend_from_slice(b"{\"output\":");
        json_text(&mut line, &path_text);
        line.extend_from_slice(
            format!(",\"format\":\"{format}\",\"keys\":{keys},\"bytes\":{bytes}}}\n").as_bytes(),
        );
        out.write_all(&line)
    } else {
        writeln!(
            out,
            "wrote {keys} keys to {path_text} ({format}, {bytes} bytes)"
        )
    };
    finish(out, printed.err(), Ok(()))
}

// ---------------------------------------------------------------------------
// Text (for people)

/// Appends `bytes` escaped and in double quotes (`"` is written `\"`).
fn quoted(out: &mut Vec<u8>, bytes: &[u8]) {
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

fn write_text_key(out: &mut impl Write, kv: &KeyValue<'_>, now_ms: i64) -> io::Result<()> {
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
fn duration_text(ms: i64) -> String {
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
fn numbered(out: &mut impl Write, line: &mut Vec<u8>, i: usize, items: &[&[u8]]) -> io::Result<()> {
    line.clear();
    line.extend_from_slice(format!("  {})", i + 1).as_bytes());
    for item in items {
        line.push(b' ');
        quoted(line, item);
    }
    line.push(b'\n');
    out.write_all(line)
}

fn write_text_stream(out: &mut impl Write, s: &Stream) -> io::Result<()> {
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
fn score_text(score: f64) -> String {
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

fn sorted_members(s: &hozon::types::Set) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = s.iter().map(|m| m.with_bytes(<[u8]>::to_vec)).collect();
    v.sort_unstable();
    v
}

fn sorted_pairs(h: &hozon::types::Hash) -> Vec<(&[u8], &[u8])> {
    let mut v: Vec<(&[u8], &[u8])> = h.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------
// JSON

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The bytes `json_bytes` escapes: outside printable ASCII, `\\` and `"`
/// (a table: one load per byte instead of three comparisons).
const ESCAPED: [bool; 256] = {
    let mut t = [true; 256];
    let mut b = 0x20;
    while b <= 0x7e {
        t[b] = b == b'\\' as usize || b == b'"' as usize;
        b += 1;
    }
    t
};

/// Appends `bytes` escaped (see the module doc) as a JSON string.
pub(crate) fn json_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
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
fn plain_run(bytes: &[u8]) -> usize {
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
fn plain_word(w: u64) -> bool {
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
fn json_text(out: &mut Vec<u8>, text: &str) {
    json_bytes(out, text.as_bytes());
}

/// A score as a JSON value: a number when finite, else `"inf"`,
/// `"-inf"` (or `"nan"`, which no loader produces).
pub(crate) fn json_score(out: &mut Vec<u8>, score: f64) {
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
pub(crate) fn json_key_head(
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
pub(crate) fn json_int(b: &mut Vec<u8>, n: i64) {
    b.extend_from_slice(hozon::types::num::format_i64(n, &mut [0u8; 20]));
}

/// Below this magnitude a multiple of 1/16 is printed by Display as its
/// exact decimal (at most 4 fraction digits): doubles there are at most
/// 2^-12 apart, closer than any decimal with fewer digits comes.
const SIXTEENTHS_EXACT_BELOW: f64 = 1_099_511_627_776.0; // 2^40

/// A non-integral multiple of 1/16 below [`SIXTEENTHS_EXACT_BELOW`], as
/// Display writes it: sign, whole part, `.`, the fraction's digits without
/// trailing zeros.
fn json_sixteenths(out: &mut Vec<u8>, score: f64) {
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
fn spill(out: &mut impl Write, buf: &mut Vec<u8>) -> io::Result<()> {
    if buf.len() >= 1 << 16 {
        out.write_all(buf)?;
        buf.clear();
    }
    Ok(())
}

/// One key as a JSON object (no newline): `db`, `key`, `type`,
/// `expire_ms` (null without), `value`.
pub(crate) fn write_json_key(out: &mut impl Write, kv: &KeyValue<'_>) -> io::Result<()> {
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

fn write_json_stream(out: &mut impl Write, b: &mut Vec<u8>, s: &Stream) -> io::Result<()> {
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

// ---------------------------------------------------------------------------
// RESP

/// How RESP output states expiries and existing keys.
#[derive(Debug, Clone, Copy, Default)]
struct RespOptions {
    /// PEXPIRE with the time left instead of PEXPIREAT.
    relative: bool,
    /// DEL the key first.
    replace: bool,
}

fn put_command(buf: &mut Vec<u8>, argv: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for arg in argv {
        buf.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        buf.extend_from_slice(arg);
        buf.extend_from_slice(b"\r\n");
    }
}

/// Writes the commands that recreate one key (SELECT first when its
/// database is not `selected`). Returns false when the key was left out
/// (relative expiry of a key already expired).
fn write_resp(
    out: &mut impl Write,
    kv: &KeyValue<'_>,
    selected: &mut Option<usize>,
    options: RespOptions,
    now_ms: i64,
) -> io::Result<bool> {
    let expire = match (kv.expire_ms, options.relative) {
        (Some(at), true) if at <= now_ms => return Ok(false),
        (Some(at), true) => Some((b"PEXPIRE".as_slice(), (at - now_ms).to_string())),
        (Some(at), false) => Some((b"PEXPIREAT".as_slice(), at.to_string())),
        (None, _) => None,
    };
    let mut buf = Vec::with_capacity(256);
    if *selected != Some(kv.db) {
        put_command(&mut buf, &[b"SELECT", kv.db.to_string().as_bytes()]);
        *selected = Some(kv.db);
    }
    if options.replace {
        put_command(&mut buf, &[b"DEL", kv.key]);
    }
    for argv in commands_for(kv.key, kv.value) {
        let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        put_command(&mut buf, &args);
        spill(out, &mut buf)?;
    }
    if let Some((name, when)) = expire {
        put_command(&mut buf, &[name, kv.key, when.as_bytes()]);
    }
    out.write_all(&buf)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        let mut q = Vec::new();
        json_bytes(&mut q, &all);
        // JSON-decoding only undoes `\\` and `\"` here (no other escapes
        // are produced), then `unescape` restores the bytes.
        let text = std::str::from_utf8(&q[1..q.len() - 1]).expect("ASCII");
        let decoded = text
            .replace("\\\\", "\u{0}")
            .replace("\\\"", "\"")
            .replace('\u{0}', "\\");
        assert_eq!(unescape(decoded.as_bytes()).expect("valid"), all);
    }

    #[test]
    fn rdb_string_lengths_of_every_encoding() {
        let mut long = vec![0x80, 0, 0, 0x01, 0];
        long.extend(std::iter::repeat_n(b'x', 256));
        let mut cases: Vec<(Vec<u8>, Option<usize>)> = vec![
            (vec![3, b'a', b'b', b'c', 9], Some(4)),
            (vec![0x40, 2, b'a', b'b'], Some(4)),
            (long, Some(261)),
            (vec![0xc0, 7], Some(2)),
            (vec![0xc1, 7, 0], Some(3)),
            (vec![0xc2, 7, 0, 0, 0], Some(5)),
            // LZF: compressed length 2, plain length 5, two bytes.
            (vec![0xc3, 2, 5, 1, 2, 99], Some(5)),
            (vec![3, b'a'], None),
            (vec![0xc4], None),
            (vec![], None),
        ];
        cases.push((vec![0x81, 0, 0, 0, 0, 0, 0, 0, 1, b'z'], Some(10)));
        for (data, want) in cases {
            assert_eq!(rdb_string_len(&data), want, "{data:?}");
        }
    }

    #[test]
    fn plain_run_stops_at_the_first_byte_json_bytes_escapes() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..40 {
            for _ in 0..300 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        // Mostly printable, sometimes any byte.
                        if rng.is_multiple_of(9) {
                            (rng >> 8) as u8
                        } else {
                            0x20 + ((rng >> 8) % 95) as u8
                        }
                    })
                    .collect();
                let want = bytes
                    .iter()
                    .position(|&b| ESCAPED[usize::from(b)])
                    .unwrap_or(bytes.len());
                assert_eq!(plain_run(&bytes), want, "{bytes:?}");
            }
        }
        for b in 0..=255u8 {
            let mut bytes = b"abcdefghijklmnop".to_vec();
            bytes[9] = b;
            let want = if ESCAPED[usize::from(b)] { 9 } else { 16 };
            assert_eq!(plain_run(&bytes), want, "byte {b:#04x}");
        }
    }

    #[test]
    fn json_score_matches_score_text() {
        let scores = [
            0.0,
            -0.0,
            1.0,
            -3.0,
            0.1,
            1e-5,
            9.99e-6,
            1e17,
            1e16,
            -1e17,
            5e-324,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            123.456,
            3.0,
            -42.0,
            99_999.0,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            -9_007_199_254_740_993.0,
            1e15,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for s in scores {
            let mut b = Vec::new();
            json_score(&mut b, s);
            let want = if s.is_finite() {
                score_text(s)
            } else {
                format!("\"{}\"", score_text(s))
            };
            assert_eq!(String::from_utf8(b).unwrap(), want, "score {s:?}");
        }
        // Whole numbers of every magnitude, and their neighbours.
        let mut x = 1.0f64;
        while x < 1e18 {
            for s in [x, -x, x + 1.0, x - 1.0, x * 0.5, x + 0.5] {
                let mut b = Vec::new();
                json_score(&mut b, s);
                assert_eq!(String::from_utf8(b).unwrap(), score_text(s), "score {s:?}");
            }
            x *= 3.0;
        }
        // Multiples of 1/16 up to past the exact range.
        let mut x = 1.0f64 / 16.0;
        while x < 1e14 {
            for s in [
                x,
                -x,
                x + 0.25,
                x + 0.0625,
                -(x + 0.75),
                x + 0.5,
                x * 1.5,
                x + 0.03125,
            ] {
                let mut b = Vec::new();
                json_score(&mut b, s);
                assert_eq!(String::from_utf8(b).unwrap(), score_text(s), "score {s:?}");
            }
            x = x * 1.7 + 0.0625;
        }
    }

    #[test]
    fn scores_read_back_exactly() {
        for v in [
            0.0,
            -0.0,
            1.0,
            0.1,
            -2.5,
            1e-7,
            5e-324,
            1e300,
            123456789.125,
            1e17,
        ] {
            let t = score_text(v);
            assert_eq!(t.parse::<f64>().expect("a number"), v, "{t}");
        }
        assert_eq!(score_text(f64::INFINITY), "inf");
        assert_eq!(score_text(f64::NEG_INFINITY), "-inf");
        assert_eq!(score_text(3.0), "3");
    }
}
