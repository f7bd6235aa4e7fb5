//! The library's typed errors.

use std::fmt;

/// An error opening or operating an engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid; the text says which parameter and why.
    Config(String),
    /// The data directory is held by another engine (the text names it).
    Locked(String),
    /// A persistence file is damaged before its tail; the text gives the
    /// offset, what is affected and the repair command to run.
    Corrupt(String),
    /// An I/O error, with what was being done.
    Io {
        /// What the engine was doing (e.g. "opening ./data/LOCK").
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(msg) => write!(f, "configuration error: {msg}"),
            Error::Locked(msg) => f.write_str(msg),
            Error::Corrupt(msg) => f.write_str(msg),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Config(_) | Error::Locked(_) | Error::Corrupt(_) => None,
        }
    }
}
