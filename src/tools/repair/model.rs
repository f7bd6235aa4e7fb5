//! What the repair code hands around: problems found, and plans (how to
//! produce the repaired file, and what it loses). The AOF analysis
//! ([`super::aof`]) and the tool's dump module plan; its `apply` carries a
//! plan out; its `main` prints.

use std::path::{Path, PathBuf};

/// The kinds of problem `check` reports (docs/repair.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// An incomplete command or batch at the end of an AOF.
    TornTail,
    /// A hozon batch whose body does not match its annotation.
    ChecksumMismatch,
    /// Bytes that are not RESP where a command should start.
    MalformedResp,
    /// Well-formed RESP naming a command hozon does not know.
    UnknownCommand,
    /// A MULTI without its EXEC.
    UnfinishedMulti,
    /// The dump.hoz or RDB image an AOF starts with is damaged.
    DamagedPreamble,
    /// A dump.hoz block that fails its checks.
    DamagedBlock,
    /// A dump.hoz/RDB header that cannot be read.
    DamagedHeader,
    /// A dump.hoz footer or trailer that cannot be read.
    DamagedFooter,
    /// An RDB record that does not decode.
    DamagedRecord,
    /// Bytes after the end of an RDB image or a dump.hoz.
    TrailingBytes,
}

impl ProblemKind {
    /// The name printed (docs/repair.md).
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::TornTail => "torn-tail",
            ProblemKind::ChecksumMismatch => "checksum-mismatch",
            ProblemKind::MalformedResp => "malformed-resp",
            ProblemKind::UnknownCommand => "unknown-command",
            ProblemKind::UnfinishedMulti => "unfinished-multi",
            ProblemKind::DamagedPreamble => "damaged-preamble",
            ProblemKind::DamagedBlock => "damaged-block",
            ProblemKind::DamagedHeader => "damaged-header",
            ProblemKind::DamagedFooter => "damaged-footer",
            ProblemKind::DamagedRecord => "damaged-record",
            ProblemKind::TrailingBytes => "trailing-bytes",
        }
    }
}

/// Which repair removes a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// `fix`: cut the torn tail.
    Fix,
    /// `salvage`: drop the region, keep the rest.
    Salvage,
    /// Nothing short of losing the file (an unknown format version).
    None,
}

impl Remedy {
    /// The name printed.
    pub fn name(self) -> &'static str {
        match self {
            Remedy::Fix => "fix",
            Remedy::Salvage => "salvage",
            Remedy::None => "none",
        }
    }
}

/// Keys listed per problem or dropped region (the total is counted).
pub const MAX_LISTED_KEYS: usize = 20;

/// The keys a region touches: the first [`MAX_LISTED_KEYS`] and the count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    /// The first keys, in file order, without repeats.
    pub listed: Vec<Vec<u8>>,
    /// Keys in all (with repeats counted once when they are listed).
    pub total: u64,
}

impl Keys {
    /// Counts `key`, listing it while there is room.
    pub fn add(&mut self, key: &[u8]) {
        if self.listed.iter().any(|k| k == key) {
            return;
        }
        self.total += 1;
        if self.listed.len() < MAX_LISTED_KEYS {
            self.listed.push(key.to_vec());
        }
    }
}

/// One problem found by `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file it is in (as named on the command line or in a manifest).
    pub file: PathBuf,
    /// First byte of the damaged region.
    pub start: u64,
    /// End of the damaged region (exclusive).
    pub end: u64,
    /// What kind of damage.
    pub kind: ProblemKind,
    /// What was found there, for people.
    pub detail: String,
    /// Complete commands in the region (AOF), or keys in a damaged block
    /// (dump.hoz, from the index), when known.
    pub commands_or_keys: Option<u64>,
    /// Keys the region touches, where readable.
    pub keys: Keys,
    /// The repair that removes it.
    pub remedy: Remedy,
}

/// Writes a whole repaired file at the path it is given.
pub type WriteFile = Box<dyn FnOnce(&Path) -> Result<(), String>>;

/// How the repaired file is made.
pub enum Content {
    /// Pieces in order: byte ranges of the original, and new bytes (a
    /// SELECT put back after a gap).
    Pieces(Vec<Piece>),
    /// A whole new file written by the closure to the path it is given
    /// (dumps rewritten by the library writers, which fsync themselves).
    Written(WriteFile),
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Content::Pieces(p) => f.debug_tuple("Pieces").field(p).finish(),
            Content::Written(_) => f.write_str("Written(..)"),
        }
    }
}

/// A piece of a repaired file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes `start..end` of the original.
    Copy(u64, u64),
    /// New bytes.
    Bytes(Vec<u8>),
}

/// A region a repair leaves out, and what it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// First byte dropped.
    pub start: u64,
    /// End of the dropped bytes (exclusive).
    pub end: u64,
    /// Why (the problem kind, or `truncate` for a point-in-time cut).
    pub reason: String,
    /// Complete commands (AOF) or keys (dumps) in it.
    pub count: u64,
    /// Keys touched, where readable.
    pub keys: Keys,
}

/// A repair of one file, ready to be carried out (or only shown, in a dry
/// run).
#[derive(Debug)]
pub struct Plan {
    /// The file it repairs.
    pub file: PathBuf,
    /// How the new file is made; None when the file needs no change.
    pub content: Option<Content>,
    /// What the new file leaves out.
    pub dropped: Vec<Dropped>,
    /// Facts for the report (a SELECT put back, a transaction kept in
    /// part, values that could not be carried over, ...).
    pub notes: Vec<String>,
}

/// Why a repair is not planned: the report says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// Writes the pieces of a repaired file, copying ranges from `original`.
/// A range outside the original is an error (a planning bug), never a
/// silently short file.
pub fn write_pieces(
    pieces: &[Piece],
    original: &[u8],
    out: &mut dyn std::io::Write,
) -> std::io::Result<u64> {
    let mut written = 0u64;
    for piece in pieces {
        let bytes: &[u8] = match piece {
            Piece::Copy(start, end) => {
                let range = usize::try_from(*start).ok().zip(usize::try_from(*end).ok());
                match range {
                    Some((s, e)) if s <= e && e <= original.len() => &original[s..e],
                    _ => {
                        return Err(std::io::Error::other(format!(
                            "piece {start}..{end} is outside the original ({} bytes)",
                            original.len()
                        )))
                    }
                }
            }
            Piece::Bytes(b) => b,
        };
        out.write_all(bytes)?;
        written += bytes.len() as u64;
    }
    Ok(written)
}
