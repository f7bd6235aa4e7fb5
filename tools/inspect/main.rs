//! hozon-inspect: looks inside `dump.hoz` snapshots, Redis and Valkey RDB
//! files and append-only files (hozon's, Redis's, a Redis 7
//! `appendonlydir`) without loading them into a server. Inputs are
//! mapped, not read into memory, and values are not built.
//!
//! Exit codes: 0 the input is fine, 1 the input has problems (each is
//! reported with its byte offset), 2 usage or I/O error. A closed output
//! pipe (`hozon-inspect info x | head -1`) ends the output quietly.
//! Subcommands and output formats: docs/inspect.md.

mod aof;
mod diff;
mod estimate;
mod export;
mod info;
mod keys;
mod memory;
mod progress;
mod source;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use hozon::tools::report;
use hozon::tools::{EXIT_PROBLEMS, EXIT_USAGE_OR_IO};

use report::Node;

/// Command line: the global `--json`, then a subcommand ([`Command`]).
#[derive(Debug, Parser)]
#[command(
    name = "hozon-inspect",
    version,
    about = "Inspect dump.hoz snapshots, Redis/Valkey RDB files and AOFs without loading them"
)]
struct Cli {
    /// Print JSON instead of aligned text (one document; for `keys`, JSON
    /// Lines: one object per key).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Format, version, creation time, databases, key counts and sizes per
    /// type, checksum status; for AOFs commands, batches, time span and
    /// damage.
    Info(InfoArgs),
    /// One line per key of any input: db, key, type, encoding, bytes,
    /// elements, expiry as UTC time. RDB files and dump.hoz are walked
    /// without keeping values; an AOF is replayed in memory first. With
    /// --json: JSON Lines, one object per key with fields db, key, type,
    /// encoding, offset, bytes, elements (null when not known up front),
    /// expire_ms and expire_utc (null without an expiry). Keys are printed
    /// escaped (in text and JSON alike): printable ASCII as is except `\`
    /// written `\\`, every other byte `\xHH`. Damage: the keys before it
    /// are printed, then the offset on stderr and exit 1. More in
    /// docs/inspect.md.
    Keys(KeysArgs),
    /// Where the bytes of a file go, in one streaming pass: the
    /// biggest keys (by record bytes; equal sizes in file order), keys and
    /// bytes per key prefix, and per type the totals and a power-of-two
    /// size distribution. A prefix is the key up to and including its
    /// --depth-th --separator (the whole key when it has fewer). Memory is
    /// bounded: the top list holds --top keys and the prefix table at most
    /// 100,000 prefixes; when it is full, the half with the fewest bytes is
    /// folded into a 'folded' total (prefixes cap hit = yes, listed counts
    /// become lower bounds, totals stay exact). Damage: what was read
    /// before it is reported, with the offset, and the exit code is 1.
    /// Works on every input (an AOF is replayed in memory first). More in
    /// docs/inspect.md.
    Memory(MemoryArgs),
    /// One key's value (as JSON, or as the RESP commands that recreate it).
    Get(export::GetArgs),
    /// Every key's value: JSON, JSON Lines, RESP commands for
    /// `redis-cli --pipe`, or another file format (--to hoz|rdb).
    Export(export::ExportArgs),
    /// Keys added, removed and changed (value or TTL) from A to B, across
    /// any two supported inputs.
    Diff(diff::DiffArgs),
    /// What an AOF holds command by command: histogram, per-key counts,
    /// timeline, and the commands of a byte or time range.
    Aof(aof::AofArgs),
}

/// Arguments of `memory`.
#[derive(Debug, Args)]
struct MemoryArgs {
    /// A dump.hoz, an RDB file, an AOF, a Redis 7 AOF manifest or its
    /// directory; `-` reads stdin.
    path: PathBuf,
    /// Only keys of this database.
    #[arg(long)]
    db: Option<usize>,
    /// Only keys of this type.
    #[arg(long = "type", value_parser = ["string", "list", "hash", "set", "zset", "stream", "module"])]
    kind: Option<String>,
    /// List the N biggest keys.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Key prefixes end at this separator (not empty).
    #[arg(long, default_value = ":", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    separator: String,
    /// A prefix runs up to the D-th separator (1: up to the first).
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    depth: u16,
    /// List the N prefixes with the most bytes.
    #[arg(long, value_name = "N", default_value_t = 20)]
    prefixes: usize,
    /// Most prefixes tracked at once (tests use a small cap).
    #[arg(long, hide = true, value_name = "N", default_value_t = memory::DEFAULT_PREFIX_CAP, value_parser = clap::value_parser!(u32).range(2..))]
    prefix_cap: u32,
}

/// Arguments of `keys`.
#[derive(Debug, Args)]
struct KeysArgs {
    /// A dump.hoz, an RDB file, an AOF, a Redis 7 AOF manifest or its
    /// directory; `-` reads stdin.
    path: PathBuf,
    /// Only keys of this database.
    #[arg(long)]
    db: Option<usize>,
    /// Only keys of this type.
    #[arg(long = "type", value_parser = ["string", "list", "hash", "set", "zset", "stream", "module"])]
    kind: Option<String>,
    /// Only keys matching this Redis glob pattern (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes).
    #[arg(long = "match", value_name = "GLOB")]
    pattern: Option<String>,
    /// Only keys matching this regular expression (Rust `regex` syntax,
    /// unanchored: use `^…$` for the whole key; `(?-u)\xHH` matches a byte).
    #[arg(long, value_name = "REGEX")]
    regex: Option<String>,
    /// Only keys whose record (type byte, key and value) takes at least this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    min_size: u64,
    /// Only keys with an expiry.
    #[arg(long, conflicts_with = "no_expires")]
    expires: bool,
    /// Only keys without an expiry.
    #[arg(long)]
    no_expires: bool,
    /// Print at most N keys.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
}

/// Arguments of `info`.
#[derive(Debug, Args)]
struct InfoArgs {
    /// A dump.hoz, an RDB file, an AOF, a Redis 7 AOF manifest or its
    /// appendonlydir (the format is detected from the content).
    path: PathBuf,
    /// dump.hoz: do not read block payloads to verify their checksums
    /// (answer from header, footer and trailer only).
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    let cli: Cli = match hozon::tools::parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let streams_lines = match &cli.command {
        Command::Keys(_) | Command::Get(_) | Command::Export(_) => true,
        Command::Aof(args) => args.list,
        _ => false,
    };
    if streams_lines && io::stdout().is_terminal() {
        progress::disable();
    }
    let result = match &cli.command {
        Command::Info(args) => info::info(&args.path, info::InfoOptions { quick: args.quick }),
        Command::Keys(args) => return keys::run(args, cli.json),
        Command::Get(args) => return export::run_get(args, cli.json),
        Command::Export(args) => return export::run_export(args, cli.json),
        Command::Diff(args) => return diff::run(args, cli.json),
        Command::Aof(args) => return aof::run(args, cli.json),
        Command::Memory(args) => memory::memory(
            &args.path,
            &memory::Options {
                db: args.db,
                kind: args.kind.clone(),
                top: args.top,
                separator: args.separator.as_bytes().to_vec(),
                depth: usize::from(args.depth),
                prefixes: args.prefixes,
                prefix_cap: args.prefix_cap as usize,
            },
        ),
    };
    let report = match result {
        Ok(r) => r,
        Err(message) => {
            let _ = writeln!(io::stderr(), "hozon-inspect: {message}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
    };
    let damaged = matches!(report.get("problems"), Some(Node::List(p)) if !p.is_empty());
    let code = if damaged { EXIT_PROBLEMS } else { 0 };
    if let Err(e) = report::print(&report, cli.json) {
        if e.kind() != io::ErrorKind::BrokenPipe {
            let _ = writeln!(io::stderr(), "hozon-inspect: writing the output: {e}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
        // The reader went away (`| head`): nothing more to say.
    }
    if damaged && !cli.json {
        // People piping the text into a pager still see why the exit code is 1.
        let _ = writeln!(
            io::stderr(),
            "hozon-inspect: the input has problems (listed under 'problems')"
        );
    }
    ExitCode::from(code)
}
