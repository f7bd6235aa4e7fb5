//! Errors.

use super::format::{FORMAT_MAJOR, FORMAT_MINOR, KNOWN_FLAGS};
use std::fmt;
use std::io;
use std::path::PathBuf;

/// What is wrong with one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockDamage {
    /// The block header's CRC does not match (or its magic is missing).
    Header(String),
    /// The block header disagrees with the footer's index.
    IndexMismatch(String),
    /// The block extends past the region it must lie in.
    OutOfBounds {
        /// Where it would end.
        end: u64,
        /// Where it must end at most.
        limit: u64,
    },
    /// The payload's CRC does not match.
    PayloadChecksum {
        /// CRC recorded in the block header.
        stored: u32,
        /// CRC of the bytes in the file.
        computed: u32,
    },
    /// LZ4 decompression failed.
    Decompress(String),
    /// Decompression produced the wrong number of bytes.
    WrongSize {
        /// `raw_len` from the header.
        expected: u64,
        /// What decompression produced.
        actual: u64,
    },
    /// A record does not parse.
    Record {
        /// Its position in the block (0-based).
        record: u32,
        /// Byte offset in the uncompressed payload.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A value split across blocks is incomplete or out of place.
    Split(String),
}

impl fmt::Display for BlockDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockDamage::Header(what) => write!(f, "block header damaged: {what}"),
            BlockDamage::IndexMismatch(what) => write!(f, "disagrees with the index: {what}"),
            BlockDamage::OutOfBounds { end, limit } => {
                write!(f, "extends to offset {end}, past its limit {limit}")
            }
            BlockDamage::PayloadChecksum { stored, computed } => write!(
                f,
                "payload checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            BlockDamage::Decompress(what) => write!(f, "decompression failed: {what}"),
            BlockDamage::WrongSize { expected, actual } => write!(
                f,
                "decompression produced {actual} bytes, expected {expected}"
            ),
            BlockDamage::Record {
                record,
                offset,
                what,
            } => write!(
                f,
                "record {record} at byte {offset} of the block does not parse: {what}"
            ),
            BlockDamage::Split(what) => write!(f, "split value: {what}"),
        }
    }
}

/// Why a snapshot could not be written or read.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// An I/O operation failed while writing or committing.
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        source: io::Error,
    },
    /// The data does not start like a snapshot.
    NotASnapshot(String),
    /// The format's major version is not one this build reads.
    UnsupportedVersion {
        /// Major version in the file.
        major: u16,
        /// Minor version in the file.
        minor: u16,
    },
    /// The header sets flag bits this build does not know.
    UnsupportedFlags {
        /// All flags of the file.
        flags: u32,
    },
    /// The header is damaged.
    Header {
        /// Offset of the problem.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file does not end with a trailer: it was cut short (or its
    /// last bytes are damaged).
    Truncated {
        /// The file's length.
        file_len: u64,
        /// What was found instead.
        detail: String,
    },
    /// The trailer is damaged.
    Trailer {
        /// Offset of the trailer.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The footer is damaged or inconsistent.
    Footer {
        /// Offset of the footer.
        offset: u64,
        /// Its length.
        len: u64,
        /// What is wrong.
        detail: String,
    },
    /// A block is damaged.
    Block {
        /// Block number.
        index: u32,
        /// File offset of the block header.
        offset: u64,
        /// Keys the block holds (from the index or its header), which a
        /// damaged block loses.
        keys: u64,
        /// What is wrong.
        damage: BlockDamage,
    },
    /// The same key occurs twice (or already exists where it is loaded).
    DuplicateKey {
        /// Database.
        db: usize,
        /// The key, escaped and shortened for display.
        key: String,
    },
    /// A key's database does not exist in the loading engine.
    DbOutOfRange {
        /// The key's database.
        db: usize,
        /// Databases the engine has.
        databases: usize,
    },
    /// The decoded contents disagree with the footer's totals.
    Mismatch(String),
    /// [`commit`](super::commit) renamed the file into place, but the fsync of its
    /// directory failed: the file is complete under its name, and the
    /// rename may not survive a power loss (the name may still refer to
    /// the previous file then).
    DirNotSynced {
        /// The file now in place.
        file: PathBuf,
        /// Why the directory fsync failed.
        source: io::Error,
    },
}

impl SnapshotError {
    /// Where in the file the problem is, when the error says: the
    /// damaged header, block, footer or trailer; the end of a file cut
    /// short; 0 for content that is not a snapshot.
    pub fn offset(&self) -> Option<u64> {
        match self {
            SnapshotError::Header { offset, .. }
            | SnapshotError::Trailer { offset, .. }
            | SnapshotError::Footer { offset, .. }
            | SnapshotError::Block { offset, .. } => Some(*offset),
            SnapshotError::Truncated { file_len, .. } => Some(*file_len),
            SnapshotError::NotASnapshot(_) => Some(0),
            _ => None,
        }
    }

    /// True when the error means damaged data (the repair tool applies),
    /// rather than I/O, version or configuration trouble.
    pub fn is_damage(&self) -> bool {
        !matches!(
            self,
            SnapshotError::Io { .. }
                | SnapshotError::DirNotSynced { .. }
                | SnapshotError::UnsupportedVersion { .. }
                | SnapshotError::UnsupportedFlags { .. }
                | SnapshotError::DbOutOfRange { .. }
        )
    }
}

const REPAIR_HINT: &str = "run `hozon-repair check <file>` to list the damage, then `hozon-repair salvage <file>` to see what is kept (add --apply to write it)";

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io { context, source } => return write!(f, "{context}: {source}"),
            SnapshotError::DirNotSynced { file, source } => {
                return write!(
                    f,
                    "fsyncing the directory after renaming {} into place: {source} (the file is \
                     complete under its name, but the rename may not survive a power loss)",
                    file.display()
                )
            }
            SnapshotError::NotASnapshot(detail) => write!(f, "not a hozon snapshot: {detail}")?,
            SnapshotError::UnsupportedVersion { major, minor } => {
                return write!(
                    f,
                    "unsupported snapshot format version {major}.{minor} (this build reads {FORMAT_MAJOR}.x)"
                )
            }
            SnapshotError::UnsupportedFlags { flags } => {
                return write!(
                    f,
                    "unsupported snapshot flags {flags:#x} (unknown bits {:#x}; this build reads format {FORMAT_MAJOR}.{FORMAT_MINOR})",
                    flags & !KNOWN_FLAGS
                )
            }
            SnapshotError::Header { offset, detail } => {
                write!(f, "snapshot header damaged at offset {offset}: {detail}")?
            }
            SnapshotError::Truncated { file_len, detail } => write!(
                f,
                "snapshot truncated or its end damaged: no valid trailer at the end of the {file_len}-byte file ({detail})"
            )?,
            SnapshotError::Trailer { offset, detail } => {
                write!(f, "snapshot trailer at offset {offset} damaged: {detail}")?
            }
            SnapshotError::Footer {
                offset,
                len,
                detail,
            } => write!(
                f,
                "snapshot footer at offset {offset} ({len} bytes) damaged: {detail}"
            )?,
            SnapshotError::Block {
                index,
                offset,
                keys,
                damage,
            } => write!(
                f,
                "snapshot block {index} at offset {offset} (holding {keys} keys) is damaged: {damage}"
            )?,
            SnapshotError::DuplicateKey { db, key } => {
                write!(f, "snapshot holds key \"{key}\" of db {db} twice")?
            }
            SnapshotError::DbOutOfRange { db, databases } => {
                return write!(
                    f,
                    "snapshot holds keys of db {db} but the server is configured with {databases} databases"
                )
            }
            SnapshotError::Mismatch(detail) => {
                write!(f, "snapshot contents disagree with its footer: {detail}")?
            }
        }
        write!(f, "; {REPAIR_HINT}")
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(super) fn display_key(key: &[u8]) -> String {
    let shown = &key[..key.len().min(64)];
    let mut s = shown.escape_ascii().to_string();
    if key.len() > shown.len() {
        s.push_str("...");
    }
    s
}

impl From<crate::persist::io::FileError> for SnapshotError {
    fn from(e: crate::persist::io::FileError) -> SnapshotError {
        SnapshotError::Io {
            context: e.context,
            source: e.source,
        }
    }
}

impl From<crate::persist::io::CommitError> for SnapshotError {
    fn from(e: crate::persist::io::CommitError) -> SnapshotError {
        match e {
            crate::persist::io::CommitError::Rename(e) => e.into(),
            crate::persist::io::CommitError::DirNotSynced { file, source } => {
                SnapshotError::DirNotSynced { file, source }
            }
        }
    }
}
