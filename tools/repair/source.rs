//! What PATH names, opened: one file or a Redis 7 manifest and its files,
//! each mapped read-only and sorted by kind (an AOF, or a whole dump).

use std::fs::File;
use std::path::{Path, PathBuf};

use hozon::persist::snapshot;
use hozon::rdb::reader;
use hozon::tools::manifest::{find_manifest, looks_like_manifest};

use crate::apply;

/// A file mapped read-only. An empty file has nothing to map.
pub(crate) struct Input {
    pub(crate) map: Option<memmap2::Mmap>,
}

impl Input {
    pub(crate) fn open(path: &Path) -> Result<Input, String> {
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

    pub(crate) fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Which analysis module reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// An AOF (any flavour, with or without a preamble).
    Aof,
    /// A whole dump.hoz or RDB file, nothing after it.
    Dump,
}

/// The kind of a file, from its content: a dump.hoz or RDB image with no
/// log after it is a dump; everything else is an AOF (possibly with a
/// preamble). A damaged image with hozon batch annotations after it is
/// still an AOF.
pub(crate) fn file_kind(data: &[u8]) -> FileKind {
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

pub(crate) fn kind_name(kind: FileKind, data: &[u8]) -> &'static str {
    match kind {
        FileKind::Dump if data.starts_with(&snapshot::MAGIC) => "dump.hoz",
        FileKind::Dump => "rdb",
        FileKind::Aof if data.starts_with(&snapshot::MAGIC) => "aof (dump.hoz preamble)",
        FileKind::Aof if reader::is_rdb(data) => "aof (rdb preamble)",
        FileKind::Aof => "aof",
    }
}

/// One file to read.
pub(crate) struct Target {
    pub(crate) path: PathBuf,
    /// `base` / `incr` for a manifest's files.
    pub(crate) role: Option<&'static str>,
    pub(crate) input: Input,
    pub(crate) kind: FileKind,
}

impl Target {
    pub(crate) fn open(path: PathBuf, role: Option<&'static str>) -> Result<Target, String> {
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
pub(crate) struct Source {
    pub(crate) targets: Vec<Target>,
    /// The manifest, its bytes and its directory.
    pub(crate) manifest: Option<(PathBuf, Input, PathBuf)>,
}

impl Source {
    /// Data directories whose engine lock guards these files: the files'
    /// directory and, for a manifest's `appendonlydir`, the one holding it.
    pub(crate) fn lock_dirs(&self) -> Vec<PathBuf> {
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

pub(crate) fn open_source(path: &Path) -> Result<Source, String> {
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
