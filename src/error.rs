//! The library's typed errors.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error opening or operating an engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid; the text says which parameter and why.
    Config(String),
    /// The data directory is held by another engine (the text names it).
    Locked(String),
    /// A file is intact but holds something this engine cannot load: a
    /// function library that does not compile (the text names the file
    /// and the library).
    Unloadable(String),
    /// A persistence file is damaged before its tail: which file, where,
    /// the typed cause, and (in its text) the repair command to run.
    Corrupt(Box<CorruptFile>),
    /// An I/O error, with what was being done.
    Io {
        /// What the engine was doing (e.g. "opening ./data/LOCK").
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A file the engine refused to load because it is damaged. Nothing was
/// loaded from it and it was not changed.
#[derive(Debug)]
pub struct CorruptFile {
    /// The damaged file.
    pub path: PathBuf,
    /// Byte offset where the damage starts, when the cause locates it.
    pub offset: Option<u64>,
    /// What is wrong, as the decoder of that format reported it.
    pub cause: CorruptCause,
    /// The whole message: facts, consequence and what to run.
    text: String,
}

/// The typed cause of a [`CorruptFile`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CorruptCause {
    /// The native snapshot (`dump.hoz` or an AOF's preamble) is damaged.
    Snapshot(crate::persist::snapshot::SnapshotError),
    /// An RDB image (a `dump.rdb`, an AOF's RDB preamble or a Redis AOF
    /// base) does not load.
    Rdb(crate::rdb::reader::RdbError),
    /// Bytes follow an RDB file's checksum.
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// The AOF's command stream is damaged or a command in it fails.
    Aof(crate::persist::aof::Corruption),
    /// The AOF ends with a torn write, and the configuration says not to
    /// drop it (`aof-load-truncated no`, or not the last file of a Redis
    /// multi-part AOF).
    TornTail(crate::persist::aof::TornTail),
    /// A Redis AOF manifest does not parse.
    Manifest(String),
    /// A Redis `incr` AOF file holds an RDB image.
    RdbInIncrFile,
}

impl CorruptFile {
    /// A damaged `path`; `text` is the message [`Display`](fmt::Display)
    /// shows.
    pub(crate) fn new(path: &Path, offset: Option<u64>, cause: CorruptCause, text: String) -> Self {
        CorruptFile {
            path: path.to_path_buf(),
            offset,
            cause,
            text,
        }
    }
}

impl fmt::Display for CorruptFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for CorruptFile {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            CorruptCause::Snapshot(e) => Some(e),
            CorruptCause::Rdb(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(msg) => write!(f, "configuration error: {msg}"),
            Error::Locked(msg) | Error::Unloadable(msg) => f.write_str(msg),
            Error::Corrupt(file) => fmt::Display::fmt(file, f),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Corrupt(file) => std::error::Error::source(file.as_ref()),
            Error::Config(_) | Error::Locked(_) | Error::Unloadable(_) => None,
        }
    }
}

impl From<CorruptFile> for Error {
    fn from(file: CorruptFile) -> Self {
        Error::Corrupt(Box::new(file))
    }
}
