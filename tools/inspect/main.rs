//! hozon-inspect: looks inside `dump.hoz` snapshots, Redis and Valkey RDB
//! files and append-only files (hozon's, Redis's, a Redis 7
//! `appendonlydir`) without loading them into a server. Inputs are
//! mapped, not read into memory, and values are not built.
//!
//! Exit codes: 0 the input is fine, 1 the input has problems (each is
//! reported with its byte offset), 2 usage or I/O error. A closed output
//! pipe (`hozon-inspect info x | head -1`) ends the output quietly.

mod info;
mod report;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use report::Node;

/// Command line: global output options, then a subcommand. Later
/// subcommands (keys, get, export, memory, diff, aof) add variants to
/// [`Command`] and reuse the global `--json`.
#[derive(Debug, Parser)]
#[command(
    name = "hozon-inspect",
    version,
    about = "Inspect dump.hoz snapshots, Redis/Valkey RDB files and AOFs without loading them"
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
    /// Format, version, creation time, databases, key counts and sizes per
    /// type, checksum status; for AOFs commands, batches, time span and
    /// damage.
    Info(InfoArgs),
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

const EXIT_PROBLEMS: u8 = 1;
const EXIT_USAGE_OR_IO: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; clap's own exit code
            // for usage errors is 2, as documented above.
            let code = if e.use_stderr() { EXIT_USAGE_OR_IO } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match &cli.command {
        Command::Info(args) => info::info(&args.path, info::InfoOptions { quick: args.quick }),
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
    if let Err(e) = emit(&report, cli.json) {
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

fn emit(report: &Node, json: bool) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        report::write_json(&mut out, report)?;
    } else {
        report::write_text(&mut out, report)?;
    }
    out.flush()
}
