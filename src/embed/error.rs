//! [`DbError`]: what a call on the embedded handle can fail with, typed.

use std::fmt;

use crate::engine::{FlushError, NOT_DURABLE};
use crate::reply::Reply;

/// A command's error reply (WRONGTYPE, ERR syntax, NOSCRIPT, …): the
/// command was refused or failed, and durability has nothing to do with
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    text: String,
}

impl CommandError {
    /// The error's code: the first word of the reply (`ERR`, `WRONGTYPE`,
    /// `NOSCRIPT`, `EXECABORT`, …).
    pub fn code(&self) -> &str {
        self.text.split(' ').next().unwrap_or("")
    }

    /// The whole error text, as the server would send it after `-`.
    pub fn message(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a call on [`Db`](super::Db) or [`Conn`](super::Conn) failed.
#[derive(Debug, Clone)]
pub enum DbError {
    /// The command's error reply. Nothing about durability.
    Command(CommandError),
    /// Refused before it ran because persistence is failing (MISCONF: the
    /// AOF cannot be written, durability was lost after a failed fsync, or
    /// the last background save failed with `stop-writes-on-bgsave-error`):
    /// nothing changed.
    Refused(String),
    /// It ran and is visible in memory, but its effects could not be made
    /// durable. Do not repeat it (that would apply it twice).
    NotDurable {
        /// What failed.
        message: String,
        /// An fsync failed: the effects may or may not survive a restart,
        /// and every later write is refused until restart. Otherwise a
        /// write(2) failed: the batch is kept and retried by the upkeep
        /// thread.
        poisoned: bool,
    },
    /// The handle was closed.
    Closed,
    /// Opening failed (the directory is locked by another engine, a file is
    /// damaged, the configuration is invalid…).
    Open(std::sync::Arc<crate::Error>),
}

impl DbError {
    /// True for the persistence failures ([`DbError::Refused`] and
    /// [`DbError::NotDurable`]).
    pub fn is_persistence(&self) -> bool {
        matches!(self, DbError::Refused(_) | DbError::NotDurable { .. })
    }

    /// The command error, when it is one.
    pub fn as_command(&self) -> Option<&CommandError> {
        match self {
            DbError::Command(e) => Some(e),
            _ => None,
        }
    }

    /// The error a top-level error reply stands for.
    pub(crate) fn from_reply_text(text: &str) -> DbError {
        let reason = text
            .strip_prefix("EXECABORT Transaction discarded because of: ")
            .unwrap_or(text);
        if reason.starts_with("MISCONF") {
            return DbError::Refused(text.to_string());
        }
        if text.starts_with(NOT_DURABLE) {
            return DbError::NotDurable {
                message: text.to_string(),
                poisoned: text.contains("fsync failed"),
            };
        }
        DbError::Command(CommandError {
            text: text.to_string(),
        })
    }

    /// The error a failed AOF write or fsync gives the callers it covers.
    pub(crate) fn from_flush(e: FlushError) -> DbError {
        match e {
            FlushError::Write(cause) => DbError::NotDurable {
                message: format!(
                    "applied in memory, but writing it to the AOF failed ({cause}); it is kept and \
                     written by a later retry"
                ),
                poisoned: false,
            },
            FlushError::Poisoned(cause) => DbError::NotDurable {
                message: format!(
                    "applied in memory, but the AOF's fsync failed ({cause}): it may or may not \
                     survive a restart, and writes are refused until then"
                ),
                poisoned: true,
            },
        }
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::Command(e) => write!(f, "{e}"),
            DbError::Refused(text) => write!(f, "refused: {text}"),
            DbError::NotDurable { message, .. } => write!(f, "not durable: {message}"),
            DbError::Closed => f.write_str("the database is closed"),
            DbError::Open(e) => write!(f, "opening failed: {e}"),
        }
    }
}

impl std::error::Error for DbError {}

/// A top-level error reply becomes `Err`; anything else is the reply.
pub(crate) fn into_result(reply: Reply) -> Result<Reply, DbError> {
    match reply {
        Reply::Error(text) => Err(DbError::from_reply_text(&text)),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_are_classified() {
        let e = DbError::from_reply_text(
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        assert_eq!(e.as_command().unwrap().code(), "WRONGTYPE");
        assert!(!e.is_persistence());
        let e = DbError::from_reply_text("MISCONF Errors writing to the AOF file: x");
        assert!(matches!(e, DbError::Refused(_)));
        let e = DbError::from_reply_text(
            "EXECABORT Transaction discarded because of: MISCONF Errors writing",
        );
        assert!(matches!(e, DbError::Refused(_)));
        let e = DbError::from_reply_text("EXECABORT Transaction discarded because of: ERR x");
        assert_eq!(e.as_command().unwrap().code(), "EXECABORT");
        let e = DbError::from_flush(FlushError::Poisoned("EIO".into()));
        assert!(matches!(e, DbError::NotDurable { poisoned: true, .. }));
        let e = DbError::from_flush(FlushError::Write("ENOSPC".into()));
        assert!(matches!(
            e,
            DbError::NotDurable {
                poisoned: false,
                ..
            }
        ));
    }
}
