//! hozon-repair: checks, fixes and salvages AOFs and dumps, and cuts an
//! AOF back to a point in time (docs/repair.md).
//!
//! Every subcommand but `check` is a dry run unless `--apply` is given: the
//! plan (what is kept, what is dropped) is printed and nothing is written.
//! Exit codes: 0 clean (check) / repaired or nothing to do, 1 problems
//! found (check) or repair refused, 2 usage or I/O error. A closed output
//! pipe ends the output quietly.

mod apply;
mod dump;
mod run;
mod source;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use hozon::tools::report::{self, Node};
use hozon::tools::time;
use hozon::tools::{EXIT_PROBLEMS, EXIT_USAGE_OR_IO};

/// Command line: the global `--json`, then a subcommand.
#[derive(Debug, Parser)]
#[command(
    name = "hozon-repair",
    version,
    about = "Check, fix and salvage AOFs and dumps a server refuses to load; cut an AOF back to a point in time"
)]
struct Cli {
    /// Print one JSON document instead of aligned text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Report every problem (byte range, kind, commands and keys touched,
    /// the repair that removes it). Exit 1 when there are problems.
    Check(CheckArgs),
    /// Cut a torn tail (an incomplete last command or batch, an unfinished
    /// MULTI at the end). Refuses when the damage is elsewhere.
    Fix(WriteArgs),
    /// Keep everything valid, drop only the damaged regions.
    Salvage(SalvageArgs),
    /// Cut an AOF before the first batch (or `#TS:` line) at or after TIME.
    Truncate(TruncateArgs),
}

/// Arguments of `check`.
#[derive(Debug, Args)]
struct CheckArgs {
    /// An AOF, a dump.hoz, an RDB file, or a Redis 7 appendonlydir (or its
    /// manifest, or the directory holding it).
    path: PathBuf,
}

/// Arguments every writing subcommand takes.
#[derive(Debug, Args)]
struct WriteArgs {
    /// An AOF, a dump.hoz, an RDB file, or a Redis 7 appendonlydir (or its
    /// manifest, or the directory holding it).
    path: PathBuf,
    /// Write the result (otherwise: a dry run that only prints the plan).
    /// The original is kept as `<name>.bak.<UTC time>`.
    #[arg(long)]
    apply: bool,
    /// With --apply: write the result to FILE (which must not exist) and
    /// leave the original alone.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Arguments of `salvage`.
#[derive(Debug, Args)]
struct SalvageArgs {
    #[command(flatten)]
    common: WriteArgs,
    /// Keep the readable commands of a transaction a damaged region cuts
    /// into (otherwise salvage refuses).
    #[arg(long)]
    allow_partial_transactions: bool,
}

/// Arguments of `truncate`.
#[derive(Debug, Args)]
struct TruncateArgs {
    #[command(flatten)]
    common: WriteArgs,
    /// Keep the data as it was just before TIME: RFC 3339
    /// (2026-11-30T12:04:00Z, offsets and fractions allowed) or Unix ms.
    #[arg(long, value_name = "TIME", value_parser = time::parse_time_ms, allow_hyphen_values = true)]
    before: i64,
}

fn main() -> ExitCode {
    let cli: Cli = match hozon::tools::parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let (report, code) = match run::run(&cli.command, cli.json) {
        Ok(done) => done,
        Err(message) => {
            let _ = writeln!(io::stderr(), "hozon-repair: {message}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
    };
    if let Err(e) = report::print(&report, cli.json) {
        if e.kind() != io::ErrorKind::BrokenPipe {
            let _ = writeln!(io::stderr(), "hozon-repair: writing the output: {e}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
        // The reader went away (`| head`): nothing more to say.
    }
    if code != 0 && !cli.json {
        // Why the exit code is not 0, also when stdout goes to a pager.
        let why = match (report.get("status"), report.get("reason")) {
            (_, Some(Node::Str(reason))) => format!("refused: {reason}"),
            (Some(Node::Str(s)), _) if s == "damaged" => {
                "the input has problems (listed under 'problems')".to_string()
            }
            (Some(Node::Str(s)), _) => s.clone(),
            _ => "failed".to_string(),
        };
        let _ = writeln!(io::stderr(), "hozon-repair: {why}");
    }
    ExitCode::from(code)
}
