//! Finding a Redis 7 AOF manifest (`appendonlydir/*.manifest`), for the
//! tools that accept a directory where a file is expected.

use std::path::{Path, PathBuf};

use crate::persist::aof;

/// Whether `data` reads as a Redis 7 AOF manifest.
pub fn looks_like_manifest(data: &[u8]) -> bool {
    data.starts_with(b"file ") && aof::parse_redis_manifest(data).is_ok()
}

/// The manifest of a Redis 7 `appendonlydir`, given the directory (or the
/// directory holding an `appendonlydir`).
pub fn find_manifest(dir: &Path) -> Result<PathBuf, String> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        if entry.file_name().to_string_lossy().ends_with(".manifest") {
            found.push(entry.path());
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 if dir.join("appendonlydir").is_dir() => find_manifest(&dir.join("appendonlydir")),
        0 => Err(format!(
            "{}: a directory, but it holds no Redis AOF manifest (*.manifest)",
            dir.display()
        )),
        _ => Err(format!(
            "{}: holds several AOF manifests; name the one to read",
            dir.display()
        )),
    }
}
