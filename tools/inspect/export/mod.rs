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

mod filter;
mod json;
mod rdb_json;
mod resp;
mod text;

use filter::Filter;
use json::{json_text, write_json_key};
use resp::{write_resp, RespOptions};
use text::write_text_key;

use std::ffi::OsString;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use hozon::persist::io::{Io, RealIo};
use hozon::persist::rdb_file::RdbFile;
use hozon::persist::snapshot::{self, BlockBuilder, FileWriter, HeaderInfo};
use hozon::rdb::writer::Encoder;
use hozon::rdb::writer::RecordEncoder;
use hozon::tools::{EXIT_PROBLEMS, EXIT_USAGE_OR_IO};

use hozon::rdb::{self, reader};
use hozon::Config;

use crate::info::Input;
use crate::source::{self, Failure, KeyValue};

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
        Failure::Damaged(m) => fail(EXIT_PROBLEMS, &format!("the input is damaged: {m}")),
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
/// One per export: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
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
                EXIT_PROBLEMS,
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

#[cfg(test)]
mod tests;
