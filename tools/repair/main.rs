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

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use hozon::persist::snapshot;
use hozon::rdb::reader;
use hozon::tools::manifest::{find_manifest, looks_like_manifest};
use hozon::tools::repair::{aof, model};
use hozon::tools::{report, time};

use model::{Content, Dropped, Keys, Piece, Plan, Problem, Refusal, Remedy};
use report::Node;

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

const EXIT_PROBLEMS: u8 = 1;
const EXIT_USAGE_OR_IO: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; usage errors exit 2.
            let code = if e.use_stderr() { EXIT_USAGE_OR_IO } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let (report, code) = match run(&cli.command, cli.json) {
        Ok(done) => done,
        Err(message) => {
            let _ = writeln!(io::stderr(), "hozon-repair: {message}");
            return ExitCode::from(EXIT_USAGE_OR_IO);
        }
    };
    if let Err(e) = emit(&report, cli.json) {
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

// ---------------------------------------------------------------------------
// The analysis modules (aof.rs, dump.rs), reached through one place.

fn check_file(kind: FileKind, file: &Path, data: &[u8]) -> Vec<Problem> {
    match kind {
        FileKind::Aof => aof::check(file, data),
        FileKind::Dump => dump::check(file, data),
    }
}

fn plan_file(op: &Op, kind: FileKind, file: &Path, data: &[u8]) -> Result<Plan, Refusal> {
    match (op, kind) {
        (Op::Fix, FileKind::Aof) => aof::plan_fix(file, data),
        (Op::Fix, FileKind::Dump) => dump::plan_fix(file, data),
        (Op::Salvage { allow_partial }, FileKind::Aof) => {
            aof::plan_salvage(file, data, *allow_partial)
        }
        (Op::Salvage { .. }, FileKind::Dump) => dump::plan_salvage(file, data),
        (Op::Truncate { before_ms }, FileKind::Aof) => aof::plan_truncate(file, data, *before_ms),
        (Op::Truncate { .. }, FileKind::Dump) => Err(Refusal(format!(
            "{} is a dump: it holds no times to cut by (truncate works on AOFs)",
            file.display()
        ))),
    }
}

// ---------------------------------------------------------------------------
// Inputs.

/// A file mapped read-only. An empty file has nothing to map.
struct Input {
    map: Option<memmap2::Mmap>,
}

impl Input {
    fn open(path: &Path) -> Result<Input, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !meta.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        }
        if meta.len() == 0 {
            return Ok(Input { map: None });
        }
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating the file while it is read could fault; the
        // tool refuses to work on a directory an engine holds, and accepts
        // that risk otherwise (as every mmap-based reader does) to read
        // files larger than memory without copying them.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| format!("{}: cannot map: {e}", path.display()))?;
        Ok(Input { map: Some(map) })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Which analysis module reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// An AOF (any flavour, with or without a preamble).
    Aof,
    /// A whole dump.hoz or RDB file, nothing after it.
    Dump,
}

/// The kind of a file, from its content: a dump.hoz or RDB image with no
/// log after it is a dump; everything else is an AOF (possibly with a
/// preamble). A damaged image with hozon batch annotations after it is
/// still an AOF.
fn file_kind(data: &[u8]) -> FileKind {
    let log_follows = |rest: &[u8]| rest.first().is_some_and(|b| matches!(b, b'*' | b'#'));
    if data.starts_with(&snapshot::MAGIC) {
        return match snapshot::image_len(data) {
            Ok(len) if len >= data.len() => FileKind::Dump,
            Ok(len) if log_follows(&data[len..]) => FileKind::Aof,
            Ok(_) => FileKind::Dump,
            Err(_) if contains(data, hozon::persist::aof::ANNOTATION_PREFIX) => FileKind::Aof,
            Err(_) => FileKind::Dump,
        };
    }
    if reader::is_rdb(data) {
        return match reader::scan(data) {
            Ok(s) if s.len < data.len() && log_follows(&data[s.len..]) => FileKind::Aof,
            _ => FileKind::Dump,
        };
    }
    FileKind::Aof
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn kind_name(kind: FileKind, data: &[u8]) -> &'static str {
    match kind {
        FileKind::Dump if data.starts_with(&snapshot::MAGIC) => "dump.hoz",
        FileKind::Dump => "rdb",
        FileKind::Aof if data.starts_with(&snapshot::MAGIC) => "aof (dump.hoz preamble)",
        FileKind::Aof if reader::is_rdb(data) => "aof (rdb preamble)",
        FileKind::Aof => "aof",
    }
}

/// One file to read.
struct Target {
    path: PathBuf,
    /// `base` / `incr` for a manifest's files.
    role: Option<&'static str>,
    input: Input,
    kind: FileKind,
}

impl Target {
    fn open(path: PathBuf, role: Option<&'static str>) -> Result<Target, String> {
        let input = Input::open(&path)?;
        let kind = file_kind(input.bytes());
        Ok(Target {
            path,
            role,
            input,
            kind,
        })
    }
}

/// What PATH names: one file, or a Redis 7 manifest and its files.
struct Source {
    targets: Vec<Target>,
    /// The manifest, its bytes and its directory.
    manifest: Option<(PathBuf, Input, PathBuf)>,
}

impl Source {
    /// Data directories whose engine lock guards these files: the files'
    /// directory and, for a manifest's `appendonlydir`, the one holding it.
    fn lock_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        match &self.manifest {
            Some((_, _, dir)) => {
                dirs.push(dir.clone());
                let up = apply::parent_dir(&dir.canonicalize().unwrap_or_else(|_| dir.clone()));
                if !dirs.contains(&up) {
                    dirs.push(up);
                }
            }
            None => {
                for t in &self.targets {
                    let d = apply::parent_dir(&t.path);
                    // A file inside a Redis 7 appendonlydir: the data
                    // directory (and its lock) is the one holding it.
                    let full = d.canonicalize().unwrap_or_else(|_| d.clone());
                    if full.file_name().is_some_and(|n| n == "appendonlydir") {
                        let up = apply::parent_dir(&full);
                        if !dirs.contains(&up) {
                            dirs.push(up);
                        }
                    }
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
            }
        }
        dirs
    }
}

fn open_source(path: &Path) -> Result<Source, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest = if meta.is_dir() {
        Some(find_manifest(path)?)
    } else {
        None
    };
    let (manifest_path, manifest_input) = match manifest {
        Some(m) => {
            let input = Input::open(&m)?;
            (m, input)
        }
        None => {
            let target = Target::open(path.to_path_buf(), None)?;
            if !looks_like_manifest(target.input.bytes()) {
                return Ok(Source {
                    targets: vec![target],
                    manifest: None,
                });
            }
            (path.to_path_buf(), target.input)
        }
    };
    let dir = apply::parent_dir(&manifest_path);
    let entries = hozon::persist::aof::parse_redis_manifest(manifest_input.bytes())
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let mut targets = Vec::new();
    for (name, is_base) in entries {
        let role = if is_base { "base" } else { "incr" };
        let target = Target::open(dir.join(&name), Some(role))
            .map_err(|e| format!("listed in {} but unreadable: {e}", manifest_path.display()))?;
        targets.push(target);
    }
    Ok(Source {
        targets,
        manifest: Some((manifest_path, manifest_input, dir)),
    })
}

// ---------------------------------------------------------------------------
// Report helpers.

/// A key for display: printable ASCII as is except `\` written `\\`,
/// every other byte `\xHH` (as hozon-inspect prints keys).
fn escape_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// The keys of a region: a list in JSON, one comma-separated cell in text
/// (with how many more there are).
fn keys_node(keys: &Keys, json: bool) -> Node {
    let listed: Vec<String> = keys.listed.iter().map(|k| escape_key(k)).collect();
    if json {
        return Node::List(listed.into_iter().map(Node::Str).collect());
    }
    let mut text = listed.join(", ");
    let more = keys.total.saturating_sub(keys.listed.len() as u64);
    if more > 0 {
        text.push_str(&format!(" (+{more} more)"));
    }
    Node::Str(text)
}

fn stale_node(paths: &[PathBuf]) -> Node {
    Node::List(
        paths
            .iter()
            .map(|p| Node::Str(p.display().to_string()))
            .collect(),
    )
}

/// `*.repair-*.tmp` files an earlier, interrupted run left next to the
/// files this run reads or writes.
fn stale_temps(source: &Source, output: Option<&Path>) -> Vec<PathBuf> {
    let mut found = BTreeSet::new();
    for t in &source.targets {
        found.extend(apply::stale_temps(&t.path));
    }
    if let Some((m, _, _)) = &source.manifest {
        found.extend(apply::stale_temps(m));
    }
    if let Some(o) = output {
        found.extend(apply::stale_temps(o));
    }
    found.into_iter().collect()
}

/// How to write a subcommand's command line for a hint.
fn command_line(sub: &str, path: &Path) -> String {
    format!("hozon-repair {sub} {}", path.display())
}

// ---------------------------------------------------------------------------
// Subcommands.

/// What a writing subcommand does.
enum Op {
    Fix,
    Salvage { allow_partial: bool },
    Truncate { before_ms: i64 },
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Fix => "fix",
            Op::Salvage { .. } => "salvage",
            Op::Truncate { .. } => "truncate",
        }
    }
}

fn run(command: &Command, json: bool) -> Result<(Node, u8), String> {
    match command {
        Command::Check(args) => run_check(&args.path, json),
        Command::Fix(args) => run_plan(args, Op::Fix, json),
        Command::Salvage(args) => run_plan(
            &args.common,
            Op::Salvage {
                allow_partial: args.allow_partial_transactions,
            },
            json,
        ),
        Command::Truncate(args) => run_plan(
            &args.common,
            Op::Truncate {
                before_ms: args.before,
            },
            json,
        ),
    }
}

fn run_check(path: &Path, json: bool) -> Result<(Node, u8), String> {
    let source = open_source(path)?;
    let mut report = Node::object().with("path", path.display().to_string());
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for t in &source.targets {
        let data = t.input.bytes();
        let found = check_file(t.kind, &t.path, data);
        let mut row = Node::object().with("file", t.path.display().to_string());
        if let Some(role) = t.role {
            row.set("role", role);
        }
        row.set("format", kind_name(t.kind, data));
        row.set("size_bytes", data.len());
        row.set("problems", found.len());
        files.push(row);
        problems.extend(found);
    }
    report.set("status", if problems.is_empty() { "ok" } else { "damaged" });
    if let Some((m, _, _)) = &source.manifest {
        report.set("manifest", m.display().to_string());
    }
    report.set("files", files);
    let rows: Vec<Node> = problems
        .iter()
        .map(|p| {
            Node::object()
                .with("file", p.file.display().to_string())
                .with("start", p.start)
                .with("end", p.end)
                .with("kind", p.kind.name())
                .with("commands", p.commands_or_keys)
                .with("keys", keys_node(&p.keys, json))
                .with("keys_total", p.keys.total)
                .with("repair", p.remedy.name())
                .with("detail", p.detail.as_str())
        })
        .collect();
    report.set("problems", rows);
    let count = |r: Remedy| problems.iter().filter(|p| p.remedy == r).count();
    let (fix, salvage, none) = (
        count(Remedy::Fix),
        count(Remedy::Salvage),
        count(Remedy::None),
    );
    let next = if problems.is_empty() {
        Node::Null
    } else if salvage > 0 || none > 0 {
        Node::Str(format!(
            "{} (a dry run; add --apply to write the result)",
            command_line("salvage", path)
        ))
    } else {
        Node::Str(format!(
            "{} (a dry run; add --apply to write the result)",
            command_line("fix", path)
        ))
    };
    let mut summary = Node::object()
        .with("problems", problems.len())
        .with("repair_fix", fix)
        .with("repair_salvage", salvage)
        .with("repair_none", none)
        .with("next", next);
    let stale = stale_temps(&source, None);
    if !stale.is_empty() {
        summary.set("stale_temp_files", stale_node(&stale));
    }
    report.set("summary", summary);
    let code = if problems.is_empty() {
        0
    } else {
        EXIT_PROBLEMS
    };
    Ok((report, code))
}

/// One file's planned change.
struct FilePlan<'s> {
    target: &'s Target,
    plan: Plan,
}

/// Plans for every file the subcommand changes, or the refusal.
struct Planned<'s> {
    files: Vec<FilePlan<'s>>,
    /// Manifest files left out of a new manifest (truncate).
    dropped_files: Vec<&'s Target>,
}

fn plan_all<'s>(op: &Op, source: &'s Source) -> Result<Planned<'s>, Refusal> {
    let mut planned = Planned {
        files: Vec::new(),
        dropped_files: Vec::new(),
    };
    let in_manifest = source.manifest.is_some();
    let prefix = |t: &Target, r: Refusal| {
        if in_manifest && !r.0.contains(&t.path.display().to_string()) {
            Refusal(format!("{}: {}", t.path.display(), r.0))
        } else {
            r
        }
    };
    if let Op::Truncate { .. } = op {
        let mut cut = false;
        for t in &source.targets {
            if cut {
                planned.dropped_files.push(t);
                continue;
            }
            let data = t.input.bytes();
            // A dump (the base) is older than everything after it; an empty
            // incr file holds nothing to cut.
            if in_manifest && (t.kind == FileKind::Dump || data.is_empty()) {
                continue;
            }
            let plan = plan_file(op, t.kind, &t.path, data).map_err(|r| prefix(t, r))?;
            if plan.content.is_some() {
                cut = true;
                planned.files.push(FilePlan { target: t, plan });
            }
        }
        return Ok(planned);
    }
    for t in &source.targets {
        let data = t.input.bytes();
        // In a manifest, only files with problems are planned (a clean
        // base dump has nothing to fix and no tail).
        if in_manifest && check_file(t.kind, &t.path, data).is_empty() {
            continue;
        }
        let plan = plan_file(op, t.kind, &t.path, data).map_err(|r| prefix(t, r))?;
        if plan.content.is_some() || !plan.dropped.is_empty() || !plan.notes.is_empty() {
            planned.files.push(FilePlan { target: t, plan });
        }
    }
    Ok(planned)
}

/// Bytes of the new file when it is made of pieces.
fn new_size(content: &Content) -> Option<u64> {
    match content {
        Content::Pieces(pieces) => Some(
            pieces
                .iter()
                .map(|p| match p {
                    Piece::Copy(s, e) => e.saturating_sub(*s),
                    Piece::Bytes(b) => b.len() as u64,
                })
                .sum(),
        ),
        Content::Written(_) => None,
    }
}

fn dropped_rows(dropped: &[Dropped], json: bool) -> Node {
    Node::List(
        dropped
            .iter()
            .map(|d| {
                Node::object()
                    .with("start", d.start)
                    .with("end", d.end)
                    .with("bytes", d.end.saturating_sub(d.start))
                    .with("reason", d.reason.as_str())
                    .with("count", d.count)
                    .with("keys", keys_node(&d.keys, json))
                    .with("keys_total", d.keys.total)
            })
            .collect(),
    )
}

/// The text of a manifest without the lines naming `drop`.
fn manifest_without(text: &[u8], drop: &BTreeSet<String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let names = hozon::persist::aof::parse_redis_manifest(line).unwrap_or_default();
        if names.iter().any(|(name, _)| drop.contains(name)) {
            continue;
        }
        out.extend_from_slice(line);
    }
    out
}

fn run_plan(args: &WriteArgs, op: Op, json: bool) -> Result<(Node, u8), String> {
    let source = open_source(&args.path)?;
    if args.output.is_some() && source.manifest.is_some() {
        return Err(
            "--output takes a single file; a manifest's files are repaired in place with --apply"
                .into(),
        );
    }
    let mut report = Node::object()
        .with("path", args.path.display().to_string())
        .with("command", op.name());
    if let Op::Truncate { before_ms } = op {
        report.set("before", time::rfc3339_utc(before_ms));
        report.set("before_ms", before_ms);
    }
    let stale = stale_temps(&source, args.output.as_deref());
    let planned = match plan_all(&op, &source) {
        Ok(p) => p,
        Err(Refusal(reason)) => {
            report.set("status", "refused");
            report.set("reason", reason);
            if !stale.is_empty() {
                report.set("stale_temp_files", stale_node(&stale));
            }
            return Ok((report, EXIT_PROBLEMS));
        }
    };
    let changes =
        planned.files.iter().any(|f| f.plan.content.is_some()) || !planned.dropped_files.is_empty();

    // What each file's plan keeps and drops.
    let mut sections: Vec<Node> = Vec::new();
    let mut contents = Vec::new();
    for fp in planned.files {
        let t = fp.target;
        let data = t.input.bytes();
        let mut node = Node::object().with("file", fp.plan.file.display().to_string());
        if let Some(role) = t.role {
            node.set("role", role);
        }
        node.set("format", kind_name(t.kind, data));
        node.set(
            "action",
            if fp.plan.content.is_some() {
                "rewrite"
            } else {
                "unchanged"
            },
        );
        node.set("original_bytes", data.len());
        node.set("new_bytes", fp.plan.content.as_ref().and_then(new_size));
        let lost: u64 = fp.plan.dropped.iter().map(|d| d.count).sum();
        node.set("dropped_regions", fp.plan.dropped.len());
        node.set("dropped_count", lost);
        node.set("dropped", dropped_rows(&fp.plan.dropped, json));
        node.set(
            "notes",
            Node::List(
                fp.plan
                    .notes
                    .iter()
                    .map(|n| Node::from(n.as_str()))
                    .collect(),
            ),
        );
        sections.push(node);
        if let Some(content) = fp.plan.content {
            contents.push((t, content, sections.len() - 1));
        }
    }
    let mut new_manifest = None;
    if !planned.dropped_files.is_empty() {
        if let Some((m, m_input, _)) = &source.manifest {
            let names: BTreeSet<String> = planned
                .dropped_files
                .iter()
                .filter_map(|t| t.path.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            for t in &planned.dropped_files {
                let node = Node::object()
                    .with("file", t.path.display().to_string())
                    .with("role", t.role)
                    .with("action", "left out of the new manifest (kept on disk)")
                    .with("original_bytes", t.input.bytes().len());
                sections.push(node);
            }
            let text = manifest_without(m_input.bytes(), &names);
            let node = Node::object()
                .with("file", m.display().to_string())
                .with("action", "rewrite")
                .with("original_bytes", m_input.bytes().len())
                .with("new_bytes", text.len());
            sections.push(node);
            new_manifest = Some((m.clone(), text, sections.len() - 1));
        }
    }
    if !stale.is_empty() {
        report.set("stale_temp_files", stale_node(&stale));
    }

    let mut code = 0;
    let status;
    if !changes {
        status = "nothing to do".to_string();
    } else if !args.apply {
        status = match &args.output {
            Some(out) => format!(
                "dry run: nothing written; add --apply to write {}",
                out.display()
            ),
            None => "dry run: nothing written; add --apply".to_string(),
        };
    } else {
        let lock_dirs = source.lock_dirs();
        let mut failed = None;
        for (t, content, at) in contents {
            match apply::apply(
                content,
                t.input.bytes(),
                &t.path,
                args.output.as_deref(),
                &lock_dirs,
            ) {
                Ok(done) => record_outcome(&mut sections[at], &done),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if failed.is_none() {
            if let (Some((m, text, at)), Some((_, m_input, _))) = (new_manifest, &source.manifest) {
                match apply::apply(
                    Content::Pieces(vec![Piece::Bytes(text)]),
                    m_input.bytes(),
                    &m,
                    None,
                    &lock_dirs,
                ) {
                    Ok(done) => record_outcome(&mut sections[at], &done),
                    Err(e) => failed = Some(e),
                }
            }
        }
        status = match failed {
            None => "applied".to_string(),
            Some(apply::Failure::Refused(reason)) => {
                code = EXIT_PROBLEMS;
                report.set("reason", reason);
                "refused".to_string()
            }
            Some(apply::Failure::Io(e)) => {
                code = EXIT_USAGE_OR_IO;
                format!("failed: {e}")
            }
        };
    }
    report.set("status", status);
    if json {
        report.set("files", Node::List(sections));
    } else {
        // One section per file (file names go in a field: section titles
        // are labels, with `_` shown as a space).
        for (n, node) in sections.into_iter().enumerate() {
            report.set(&format!("file_{}", n + 1), node);
        }
    }
    Ok((report, code))
}

fn record_outcome(node: &mut Node, done: &apply::Outcome) {
    node.set("written", done.written.display().to_string());
    node.set("written_bytes", done.bytes);
    node.set(
        "backup",
        done.backup.as_ref().map(|b| b.display().to_string()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_escaped_like_the_inspector_prints_them() {
        assert_eq!(escape_key(b"a\\b\x00\xff ~"), "a\\\\b\\x00\\xff ~");
        let mut keys = Keys::default();
        for k in 0..25u8 {
            keys.add(&[b'k', k]);
        }
        let Node::Str(text) = keys_node(&keys, false) else {
            panic!("text keys are one cell");
        };
        assert!(text.starts_with("k\\x00, k\\x01"), "{text}");
        assert!(text.ends_with("(+5 more)"), "{text}");
    }

    #[test]
    fn manifest_lines_of_dropped_files_are_left_out() {
        let text = b"file appendonly.aof.1.base.rdb seq 1 type b\n\
                     file appendonly.aof.1.incr.aof seq 1 type i\n\
                     file appendonly.aof.2.incr.aof seq 2 type i\n";
        let drop: BTreeSet<String> = ["appendonly.aof.2.incr.aof".to_string()].into();
        let out = manifest_without(text, &drop);
        assert_eq!(
            out,
            b"file appendonly.aof.1.base.rdb seq 1 type b\n\
              file appendonly.aof.1.incr.aof seq 1 type i\n"
        );
    }

    #[test]
    fn content_decides_the_kind() {
        assert_eq!(file_kind(b""), FileKind::Aof);
        assert_eq!(file_kind(b"*1\r\n$4\r\nPING\r\n"), FileKind::Aof);
        assert_eq!(file_kind(b"REDIS0011garbage"), FileKind::Dump);
    }
}
