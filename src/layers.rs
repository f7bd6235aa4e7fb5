//! The layer order of the crate's modules, checked: a module may refer to
//! modules of its own layer or of a lower one, never to a higher one
//! (ARCHITECTURE.md, "Layers").
//!
//! The check reads every file under `src/`, maps it to its module path and
//! that to a layer, and collects every `crate::…` and `super::…` path in
//! its code (`use` lines, brace groups and inline paths alike; comments,
//! doc links and `#[cfg(test)]` code are left out: tests may drive the
//! whole engine). The crate root (`lib.rs`) re-exports and is exempt.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, bottom-up: each top-level module of `src/` and its layer.
const LAYERS: &[(&str, usize)] = &[
    // 0: values and their pure operations, no I/O.
    ("clock", 0),
    ("glob", 0),
    ("rand", 0),
    ("types", 0),
    ("keyspace", 0),
    ("reply", 0),
    ("resp", 0),
    // 1: configuration.
    ("config", 1),
    // 2: files: codecs, the AOF and snapshots.
    ("rdb", 2),
    ("persist", 2),
    // Replication's codecs: the stream, the backlog, PSYNC, the payload.
    ("repl", 2),
    // The engine's error type: a damaged file carries the decoders' typed
    // errors, so it sits with them.
    ("error", 2),
    // 3: the engine's state and its background work; ACL users (the
    // command layer installs their command table).
    ("core", 3),
    ("acl", 3),
    // 4: commands and the scripts that run them.
    ("command", 4),
    ("script", 4),
    // 5: the engine API: open, dispatch, cron.
    ("engine", 5),
    // 6: the programs on top: the network server, and the inspector's and
    // the repair tool's shared code.
    ("server", 6),
    // The embedded handle: threads, upkeep and group commit on the engine.
    ("embed", 6),
    ("tools", 6),
];

const LAYER_NAMES: &[&str] = &[
    "data",
    "config",
    "files",
    "core",
    "command",
    "engine",
    "server/tools",
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The text with comments and string literals blanked (so paths in them
/// are not read as references).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'"' && !(i > 0 && (b[i - 1] == b'\'' || b[i - 1] == b'r')) {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The text without `#[cfg(test)]` items, and the names of the child
/// modules declared as `#[cfg(test)] mod name;`.
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let brace = after.find('{');
        let semi = after.find(';');
        match (brace, semi) {
            (Some(open), semi) if semi.is_none_or(|s| open < s) => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, c) in after[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (_, Some(s)) => {
                let item = after[..s].trim();
                if let Some(name) = item.strip_prefix("mod ") {
                    test_mods.push(name.trim().to_string());
                }
                rest = &after[s + 1..];
            }
            _ => rest = "",
        }
    }
    out.push_str(rest);
    (out, test_mods)
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a path starting right after `crate::` names: one,
/// or each item of a `{…}` group.
fn first_segments(after: &str, out: &mut Vec<String>) {
    let after = after.trim_start();
    if let Some(group) = after.strip_prefix('{') {
        let mut depth = 0;
        let mut item_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_start = true,
                c if c.is_whitespace() => {}
                _ if item_start && depth == 0 => {
                    item_start = false;
                    let ident = ident_at(&group[i..]);
                    if !ident.is_empty() && ident != "self" {
                        out.push(ident.to_string());
                    }
                }
                _ => {}
            }
        }
    } else {
        let ident = ident_at(after);
        if !ident.is_empty() {
            out.push(ident.to_string());
        }
    }
}

/// The top-level modules `code` (of the module at `path`) refers to.
fn references(path: &[String], code: &str) -> BTreeSet<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("crate::") {
        // `$crate::` is the same; `hozon_crate::` or `foo_crate::` is not.
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        first_segments(&code[at + "crate::".len()..], &mut found);
    }
    for (at, _) in code.match_indices("super::") {
        if at > 0
            && (bytes[at - 1].is_ascii_alphanumeric()
                || bytes[at - 1] == b'_'
                || bytes[at - 1] == b':')
        {
            continue;
        }
        let mut rest = &code[at..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            up += 1;
            rest = r;
        }
        if up < path.len() {
            // Still inside the same top-level module.
            found.push(path[0].clone());
        } else if up == path.len() {
            first_segments(rest, &mut found);
        }
    }
    found.into_iter().collect()
}

/// Every reference from a module to a module of a higher layer, as
/// `file: module (layer) -> module (layer)`; and files whose top-level
/// module has no layer.
fn upward_references(src: &Path) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    // Files compiled only for tests: `#[cfg(test)] mod name;` in a parent.
    let mut test_files: Vec<PathBuf> = Vec::new();
    let mut parsed = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (code, test_mods) = without_tests(&code_only(&text));
        let is_dir_module = file
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
        let dir = if is_dir_module {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for name in test_mods {
            test_files.push(dir.join(format!("{name}.rs")));
            test_files.push(dir.join(&name));
        }
        parsed.push((file, code));
    }
    let mut upward = Vec::new();
    let mut unmapped = Vec::new();
    for (file, code) in parsed {
        let path = module_path(src, file);
        if path.is_empty() || test_files.iter().any(|t| file.starts_with(t)) {
            continue;
        }
        let Some(own) = layer_of(&path[0]) else {
            unmapped.push(file.display().to_string());
            continue;
        };
        for target in references(&path, &code) {
            match layer_of(&target) {
                Some(layer) if layer > own => upward.push(format!(
                    "{}: {} ({}) -> {} ({})",
                    file.display(),
                    path.join("::"),
                    LAYER_NAMES[own],
                    target,
                    LAYER_NAMES[layer]
                )),
                Some(_) => {}
                // Items of the crate root (`crate::Error`, re-exports).
                None => {}
            }
        }
    }
    (upward, unmapped)
}

#[test]
fn no_module_refers_to_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (upward, unmapped) = upward_references(&src);
    assert!(
        unmapped.is_empty(),
        "files whose module has no layer in src/layers.rs: {unmapped:#?}"
    );
    assert!(
        upward.is_empty(),
        "references to a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_checker_sees_every_form_of_path() {
    let path = |p: &str| p.split("::").map(String::from).collect::<Vec<_>>();
    let code = code_only(
        "use crate::{reply::Reply, types::{Blob, Value}};\n\
         // crate::server::x in a comment\n\
         let s = \"crate::engine\";\n\
         fn f() { $crate::glob::matches(); super::super::config::Config::default(); }\n",
    );
    let refs = references(&path("command::ctx"), &code);
    let want: BTreeSet<String> = ["reply", "types", "glob", "config"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(refs, want);
    let (code, mods) = without_tests(
        "use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; fn x() {} }\n#[cfg(test)]\nmod t;\n",
    );
    assert_eq!(mods, vec!["t".to_string()]);
    assert_eq!(references(&path("x"), &code), ["a".to_string()].into());
}
