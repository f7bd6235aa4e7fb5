//! Carries a repair plan out without ever editing a file in place
//! (docs/repair.md, "Safety"): the new file is written to a temporary file
//! next to its destination and fsynced; the original is kept under a
//! backup name by a hard link (its bytes are never copied or modified);
//! then the temporary file is renamed over the original and the directory
//! fsynced. A crash at any point leaves either the original under its name,
//! or the new file under its name and the original as the backup. The file
//! steps are the engine's own (`persist::io`: a `DurableFile`, fsynced as
//! it grows, and `commit`, the rename and the directory fsync).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hozon::persist::io::{commit, CommitError, DurableFile, FileError, Io, RealIo};

use hozon::tools::repair::model::{self, Content};

/// Why a plan was not carried out.
#[derive(Debug)]
pub enum Failure {
    /// The tool declines (an engine holds the directory, the output exists,
    /// links are unsupported, ...): exit 1, nothing written.
    Refused(String),
    /// An I/O error: exit 2. The original is untouched; a temporary file
    /// is removed when it can be.
    Io(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(m) | Failure::Io(m) => f.write_str(m),
        }
    }
}

/// What a carried-out plan left on disk.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The path now holding the new file.
    pub written: PathBuf,
    /// The original's backup (None with `--output`, which leaves the
    /// original where it is).
    pub backup: Option<PathBuf>,
    /// Bytes of the new file.
    pub bytes: u64,
}

/// The file name of `path` as text, for names built from it.
fn file_name(path: &Path) -> Result<String, Failure> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Failure::Io(format!("{}: not a file name", path.display())))
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The temporary file this process writes next to `dest`:
/// `<name>.repair-<pid>.tmp`.
pub fn temp_path(dest: &Path) -> Result<PathBuf, Failure> {
    let name = file_name(dest)?;
    Ok(parent_dir(dest).join(format!("{name}.repair-{}.tmp", std::process::id())))
}

/// Temporary files an earlier run left next to `dest` (it was killed
/// before renaming them): `<name>.repair-*.tmp`. They are reported and
/// never used: whether one is complete cannot be known.
pub fn stale_temps(dest: &Path) -> Vec<PathBuf> {
    let Ok(name) = file_name(dest) else {
        return Vec::new();
    };
    let prefix = format!("{name}.repair-");
    let Ok(entries) = fs::read_dir(parent_dir(dest)) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with(&prefix) && n.ends_with(".tmp")
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Locks taken on data directories' `LOCK` files for the duration of a
/// write; dropping it releases them.
#[derive(Debug)]
pub struct LockProbe {
    files: Vec<File>,
}

impl Drop for LockProbe {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = f.unlock();
        }
    }
}

/// Takes the engine's lock on each `<dir>/LOCK` that exists, refusing when
/// an engine holds one. Holding it while the files are replaced also keeps
/// an engine from starting on a file about to be renamed over.
pub fn probe_locks(dirs: &[PathBuf]) -> Result<LockProbe, Failure> {
    let mut probe = LockProbe { files: Vec::new() };
    for dir in dirs {
        let path = dir.join("LOCK");
        let file = match OpenOptions::new().read(true).open(&path) {
            Ok(f) => f,
            // No lock file: no engine has this directory.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Failure::Io(format!("opening {}: {e}", path.display()))),
        };
        match file.try_lock() {
            Ok(()) => probe.files.push(file),
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                };
                return Err(Failure::Refused(format!(
                    "an engine holds {}{who}; stop it first",
                    dir.display()
                )));
            }
            Err(fs::TryLockError::Error(e)) => {
                return Err(Failure::Io(format!("locking {}: {e}", path.display())))
            }
        }
    }
    Ok(probe)
}

/// Fsyncs a directory so a rename or link in it is durable.
fn sync_dir(dir: &Path) -> Result<(), Failure> {
    RealIo
        .sync_dir(dir)
        .map_err(|e| Failure::Io(format!("fsync of directory {}: {e}", dir.display())))
}

/// A [`DurableFile`] as a `Write` for the plan's pieces, fsynced every
/// [`SYNC_EVERY_BYTES`](hozon::persist::io::SYNC_EVERY_BYTES) as it grows.
struct Pieces<'a>(&'a mut DurableFile);

impl Write for Pieces<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let as_io = |e: FileError| io::Error::new(e.source.kind(), e.to_string());
        self.0.append(buf).map_err(as_io)?;
        self.0.sync_if_due().map_err(as_io)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Removes our temporary file after a failure; the error being reported
/// matters more than a failed cleanup.
struct TempGuard {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Writes `content` to `temp` (which must not exist) and fsyncs it.
fn write_temp(content: Content, original: &[u8], temp: &Path) -> Result<u64, Failure> {
    let io_err = |e: io::Error| Failure::Io(format!("writing {}: {e}", temp.display()));
    match content {
        Content::Pieces(pieces) => {
            let failed = |e: FileError| Failure::Io(e.to_string());
            let mut file = DurableFile::create(Arc::new(RealIo), temp).map_err(failed)?;
            let mut out = BufWriter::with_capacity(1 << 20, Pieces(&mut file));
            let bytes = model::write_pieces(&pieces, original, &mut out).map_err(io_err)?;
            out.flush().map_err(io_err)?;
            drop(out);
            file.finish().map_err(failed)?;
            Ok(bytes)
        }
        Content::Written(write) => {
            write(temp).map_err(|e| Failure::Io(format!("writing {}: {e}", temp.display())))?;
            // The writers fsync themselves; once more costs little and does
            // not depend on that.
            let file = File::open(temp).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
            Ok(file.metadata().map_err(io_err)?.len())
        }
    }
}

/// The failure after the new file took its name but the directory fsync
/// failed.
fn in_place_unsynced(dest: &Path, backup: Option<&Path>, dir: &Path, e: &io::Error) -> Failure {
    Failure::Io(format!(
        "{} is in place (written and fsynced{}), but fsync of directory {}: {e}: the rename may \
         not survive a power loss",
        dest.display(),
        backup
            .map(|b| format!("; the original is kept as {}", b.display()))
            .unwrap_or_default(),
        dir.display()
    ))
}

/// A backup name for `target` that does not exist yet:
/// `<name>.bak.<YYYYMMDDTHHMMSSZ>`, with `.1`, `.2`, ... when a backup of
/// the same second exists. Taken by hard-linking the original to it.
fn link_backup(target: &Path) -> Result<PathBuf, Failure> {
    let name = file_name(target)?;
    let dir = parent_dir(target);
    let stamp = hozon::tools::time::compact_utc(hozon::tools::time::now_ms());
    for n in 0..1000u32 {
        let backup = if n == 0 {
            dir.join(format!("{name}.bak.{stamp}"))
        } else {
            dir.join(format!("{name}.bak.{stamp}.{n}"))
        };
        match fs::hard_link(target, &backup) {
            Ok(()) => return Ok(backup),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                // Copying instead would leave a moment with the original's
                // bytes only in a copy being written: refuse instead.
                return Err(Failure::Refused(format!(
                    "cannot keep the original as a hard link {} ({e}); nothing was changed. \
                     Use --output FILE to write the result elsewhere",
                    backup.display()
                )));
            }
        }
    }
    Err(Failure::Refused(format!(
        "too many backups of {} this second",
        target.display()
    )))
}

/// Carries out `content` for the file `target` whose bytes are `original`
/// (mapped from `target`). Without `output`, the new file replaces
/// `target` and the original is kept as a backup; with it, the new file
/// is created at `output` (refused if it exists) and `target` is left
/// alone. `lock_dirs` are the data directories whose engine lock is
/// checked (and held while writing).
pub fn apply(
    content: Content,
    original: &[u8],
    target: &Path,
    output: Option<&Path>,
    lock_dirs: &[PathBuf],
) -> Result<Outcome, Failure> {
    let dest = output.unwrap_or(target);
    if let Some(out) = output {
        if fs::symlink_metadata(out).is_ok() {
            return Err(Failure::Refused(format!(
                "{} exists; --output never overwrites (remove it or choose another name)",
                out.display()
            )));
        }
    }
    let mut dirs = lock_dirs.to_vec();
    if output.is_some() {
        // The output's directory may be an engine's too.
        let out_dir = parent_dir(dest);
        if !dirs.contains(&out_dir) {
            dirs.push(out_dir);
        }
    }
    let probe = probe_locks(&dirs)?;
    let temp = temp_path(dest)?;
    if fs::symlink_metadata(&temp).is_ok() {
        return Err(Failure::Refused(format!(
            "{} exists (left by an earlier run with this process id?); \
             it is not used: inspect and remove it, then run again",
            temp.display()
        )));
    }
    let mut guard = TempGuard {
        path: temp.clone(),
        armed: true,
    };
    let bytes = write_temp(content, original, &temp)?;
    let dir = parent_dir(dest);
    let backup = match output {
        Some(out) => {
            // A link cannot overwrite: the output appears complete or not
            // at all, and never replaces a file created meanwhile.
            match fs::hard_link(&temp, out) {
                Ok(()) => {
                    let _ = fs::remove_file(&temp);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(Failure::Refused(format!(
                        "{} appeared while writing; not overwritten",
                        out.display()
                    )))
                }
                Err(_) => {
                    // No links on this file system: a rename, after the
                    // existence check above.
                    fs::rename(&temp, out).map_err(|e| {
                        Failure::Io(format!(
                            "renaming {} to {}: {e}",
                            temp.display(),
                            out.display()
                        ))
                    })?;
                }
            }
            None
        }
        None => {
            let backup = link_backup(target)?;
            // The backup link is made durable before the name is replaced.
            sync_dir(&dir)?;
            match commit(&RealIo, &temp, target) {
                Ok(()) => {}
                Err(CommitError::Rename(e)) => {
                    return Err(Failure::Io(format!(
                        "{e} (the original is unchanged; its backup link {} may be removed)",
                        backup.display()
                    )))
                }
                // The rename happened: a failed directory fsync must not
                // read as if the original were still in place.
                Err(CommitError::DirNotSynced { source, .. }) => {
                    guard.armed = false;
                    return Err(in_place_unsynced(dest, Some(&backup), &dir, &source));
                }
            }
            Some(backup)
        }
    };
    guard.armed = false;
    if output.is_some() {
        RealIo
            .sync_dir(&dir)
            .map_err(|e| in_place_unsynced(dest, None, &dir, &e))?;
    }
    drop(probe);
    Ok(Outcome {
        written: dest.to_path_buf(),
        backup,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hozon::tools::repair::model::Piece;

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("test dir lists")
            .map(|e| {
                e.expect("entry reads")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_file_and_keeps_the_original_as_a_linked_backup() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("appendonly.aof");
        fs::write(&target, b"hello world").expect("write");
        let original = fs::read(&target).expect("read");
        let content = Content::Pieces(vec![Piece::Copy(0, 5), Piece::Bytes(b"!".to_vec())]);
        let done = apply(
            content,
            &original,
            &target,
            None,
            &[dir.path().to_path_buf()],
        )
        .expect("applies");
        assert_eq!(fs::read(&target).expect("read"), b"hello!");
        let backup = done.backup.expect("a backup");
        assert_eq!(fs::read(&backup).expect("read"), b"hello world");
        let name = backup
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with("appendonly.aof.bak.") && name.ends_with('Z'),
            "{name}"
        );
        assert_eq!(listing(dir.path()).len(), 2, "{:?}", listing(dir.path()));
        assert_eq!(done.bytes, 6);
    }

    #[test]
    fn two_repairs_in_one_second_keep_both_backups() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("f");
        fs::write(&target, b"one").expect("write");
        for next in [&b"two"[..], b"three"] {
            let original = fs::read(&target).expect("read");
            apply(
                Content::Pieces(vec![Piece::Bytes(next.to_vec())]),
                &original,
                &target,
                None,
                &[],
            )
            .expect("applies");
        }
        assert_eq!(fs::read(&target).expect("read"), b"three");
        assert_eq!(listing(dir.path()).len(), 3, "{:?}", listing(dir.path()));
    }

    #[test]
    fn output_leaves_the_original_and_never_overwrites() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("f");
        let out = dir.path().join("g");
        fs::write(&target, b"abc").expect("write");
        let content = Content::Pieces(vec![Piece::Copy(1, 3)]);
        let done = apply(content, b"abc", &target, Some(&out), &[]).expect("applies");
        assert!(done.backup.is_none());
        assert_eq!(fs::read(&out).expect("read"), b"bc");
        assert_eq!(fs::read(&target).expect("read"), b"abc");
        let again = apply(Content::Pieces(vec![]), b"abc", &target, Some(&out), &[]);
        assert!(matches!(again, Err(Failure::Refused(_))), "{again:?}");
        assert_eq!(fs::read(&out).expect("read"), b"bc");
        assert_eq!(listing(dir.path()), ["f", "g"]);
    }

    #[test]
    fn a_held_lock_refuses_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("f");
        fs::write(&target, b"abc").expect("write");
        let lock = File::create(dir.path().join("LOCK")).expect("lock file");
        lock.try_lock().expect("locks");
        let result = apply(
            Content::Pieces(vec![]),
            b"abc",
            &target,
            None,
            &[dir.path().to_path_buf()],
        );
        match result {
            Err(Failure::Refused(m)) => assert!(m.contains("stop it first"), "{m}"),
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(listing(dir.path()), ["LOCK", "f"]);
        lock.unlock().expect("unlocks");
        apply(
            Content::Pieces(vec![]),
            b"abc",
            &target,
            None,
            &[dir.path().to_path_buf()],
        )
        .expect("applies once the lock is free");
    }

    #[test]
    fn a_failed_write_removes_the_temp_and_keeps_the_original() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("f");
        fs::write(&target, b"abc").expect("write");
        // A piece outside the original is a planning bug: an error, not a
        // short file.
        let result = apply(
            Content::Pieces(vec![Piece::Copy(0, 99)]),
            b"abc",
            &target,
            None,
            &[],
        );
        assert!(matches!(result, Err(Failure::Io(_))), "{result:?}");
        assert_eq!(listing(dir.path()), ["f"]);
        assert_eq!(fs::read(&target).expect("read"), b"abc");
    }

    #[test]
    fn stale_temps_are_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("f");
        fs::write(dir.path().join("f.repair-123.tmp"), b"x").expect("write");
        fs::write(dir.path().join("g.repair-123.tmp"), b"x").expect("write");
        assert_eq!(
            stale_temps(&target),
            vec![dir.path().join("f.repair-123.tmp")]
        );
    }
}
