//! The one way a file is put in place: written under a temporary name,
//! fsynced as it grows and at the end ([`DurableFile`]), renamed over its
//! final name and the directory fsynced ([`commit`]). The snapshot writers
//! (`dump.hoz` and RDB: SAVE, BGSAVE, a rewrite's `dump.hoz` image, the
//! tools' exports and salvaged dumps) and the AOF rewriter (its RESP or
//! RDB image and the log part) write through it, and every rename
//! into place of the engine goes through [`commit`], over [`Io`], so the
//! fault tests cover them (docs/persistence.md, "Renames").

use super::{AppendFile, Io, SyncHandle};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes appended between two incremental fsyncs of a file being written
/// (so the final fsync has little left to flush).
pub const SYNC_EVERY_BYTES: u64 = 32 << 20;

/// A failed file operation: what was being done (with the path) and the
/// error.
#[derive(Debug)]
pub struct FileError {
    /// What was being done, with the path ("writing /data/temp-…").
    pub context: String,
    /// The error.
    pub source: io::Error,
}

impl FileError {
    fn new(context: String, source: io::Error) -> FileError {
        FileError { context, source }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A file being written under a temporary name. Any failed write or fsync
/// closes and removes it (best effort: a leftover `temp-*` file is removed
/// at the next startup anyway), and so does dropping it unfinished.
pub struct DurableFile {
    io: Arc<dyn Io>,
    path: PathBuf,
    file: Option<Box<dyn AppendFile>>,
    syncer: Arc<dyn SyncHandle>,
    len: u64,
    unsynced: u64,
    done: bool,
}

impl DurableFile {
    /// Creates `temp_path` empty (removing a stale file of that name).
    pub fn create(io: Arc<dyn Io>, temp_path: &Path) -> Result<DurableFile, FileError> {
        if io.exists(temp_path) {
            io.remove(temp_path).map_err(|e| {
                FileError::new(format!("removing stale {}", temp_path.display()), e)
            })?;
        }
        DurableFile::open(io, temp_path, true)
    }

    /// Opens the finished temporary file `temp_path` again to append to
    /// it (a rewrite's log part follows the snapshot image a
    /// [`DurableFile`] of its own wrote and fsynced).
    pub fn reopen(io: Arc<dyn Io>, temp_path: &Path) -> Result<DurableFile, FileError> {
        DurableFile::open(io, temp_path, false)
    }

    /// Opens `temp_path` for appending, emptied first when `truncate`; on
    /// failure the file is removed.
    fn open(io: Arc<dyn Io>, temp_path: &Path, truncate: bool) -> Result<DurableFile, FileError> {
        let ctx = |what: &str| format!("{what} {}", temp_path.display());
        let mut file = io
            .open_append(temp_path)
            .map_err(|e| FileError::new(ctx(if truncate { "creating" } else { "opening" }), e))?;
        let opened = if truncate { file.set_len(0) } else { Ok(()) }
            .and_then(|()| Ok((file.len()?, file.syncer()?)));
        let (len, syncer) = match opened {
            Ok(x) => x,
            Err(e) => {
                let _ = io.remove(temp_path);
                return Err(FileError::new(ctx("opening"), e));
            }
        };
        Ok(DurableFile {
            io,
            path: temp_path.to_path_buf(),
            file: Some(file),
            syncer,
            len,
            unsynced: 0,
            done: false,
        })
    }

    /// The temporary path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before anything was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends all of `bytes` (retrying short writes). Does not fsync:
    /// see [`DurableFile::sync_if_due`].
    pub fn append(&mut self, mut bytes: &[u8]) -> Result<(), FileError> {
        let Some(file) = self.file.as_mut() else {
            return Err(FileError::new(
                format!("writing {} after a failure", self.path.display()),
                io::Error::other("the writer already failed"),
            ));
        };
        while !bytes.is_empty() {
            let failure = match file.write(bytes) {
                Ok(0) => io::Error::new(io::ErrorKind::WriteZero, "write returned 0"),
                Ok(n) => {
                    bytes = &bytes[n..];
                    self.len += n as u64;
                    self.unsynced += n as u64;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => e,
            };
            self.abandon();
            return Err(FileError::new(
                format!("writing {}", self.path.display()),
                failure,
            ));
        }
        Ok(())
    }

    /// Fsyncs when [`SYNC_EVERY_BYTES`] have been appended since the last
    /// fsync. Called between the units a writer appends (a block, a chunk).
    pub fn sync_if_due(&mut self) -> Result<(), FileError> {
        if self.unsynced >= SYNC_EVERY_BYTES {
            self.sync()?;
        }
        Ok(())
    }

    /// Fsyncs what was appended so far.
    pub fn sync(&mut self) -> Result<(), FileError> {
        if let Err(e) = self.syncer.sync_data() {
            self.abandon();
            return Err(FileError::new(
                format!("fsyncing {}", self.path.display()),
                e,
            ));
        }
        self.unsynced = 0;
        Ok(())
    }

    /// Fsyncs and closes the file, complete under its temporary name
    /// ([`commit`] puts it in place). Returns its length.
    pub fn finish(mut self) -> Result<u64, FileError> {
        self.sync()?;
        self.done = true;
        self.file = None;
        Ok(self.len)
    }

    fn abandon(&mut self) {
        self.file = None;
        let _ = self.io.remove(&self.path);
    }
}

impl Drop for DurableFile {
    fn drop(&mut self) {
        if !self.done && self.file.is_some() {
            self.abandon();
        }
    }
}

/// Why [`commit`] failed.
#[derive(Debug)]
pub enum CommitError {
    /// The rename failed: the temporary file was removed and whatever was
    /// under the final name stays.
    Rename(FileError),
    /// Renamed, but the directory fsync failed: the file is complete and
    /// fsynced under its final name, but the rename may not survive a
    /// power loss. The switch happened: a caller that keeps writing to the
    /// file must treat it as in place.
    DirNotSynced {
        /// The file now in place.
        file: PathBuf,
        /// Why the directory fsync failed.
        source: io::Error,
    },
}

/// Puts a finished file in place: renames `temp_path` to `final_path`
/// (same directory) and fsyncs the directory.
pub fn commit(io: &dyn Io, temp_path: &Path, final_path: &Path) -> Result<(), CommitError> {
    if let Err(e) = io.rename(temp_path, final_path) {
        let _ = io.remove(temp_path);
        return Err(CommitError::Rename(FileError::new(
            format!(
                "renaming {} to {}",
                temp_path.display(),
                final_path.display()
            ),
            e,
        )));
    }
    // From here on the new file has the name: a failure is reported as
    // such (DirNotSynced), never as if the old file were still in place.
    let dir = match final_path.parent() {
        // A bare name ("dump.rdb") is in the current directory.
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    io.sync_dir(dir)
        .map_err(|source| CommitError::DirNotSynced {
            file: final_path.to_path_buf(),
            source,
        })
}
