//! The subcommands: `check` reports, `fix`/`salvage`/`truncate` plan (and
//! with `--apply` write) through the AOF analysis (`hozon::tools::repair::aof`)
//! or the dump module, and every result becomes a report tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hozon::tools::repair::aof;
use hozon::tools::repair::model::{Content, Dropped, Keys, Piece, Plan, Problem, Refusal, Remedy};
use hozon::tools::report::{escape_key, Node};
use hozon::tools::time;

use crate::source::{kind_name, open_source, FileKind, Source, Target};
use crate::{apply, dump, Command, WriteArgs, EXIT_PROBLEMS, EXIT_USAGE_OR_IO};

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
// Report helpers.

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

pub(crate) fn run(command: &Command, json: bool) -> Result<(Node, u8), String> {
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
    use crate::source::file_kind;

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
