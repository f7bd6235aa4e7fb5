//! The full sync payload's framing (docs/replication.md, "Full sync" and
//! "Receiving the payload").
//!
//! A master announces the payload with `$<len>\r\n` (disk: the length is
//! known) or `$EOF:<mark>\r\n` (diskless: 40 random bytes that also follow
//! the payload). Before that line it may send bare `\n` keepalives, or an
//! error line instead of it. The replica reads those lines with
//! [`PreambleReader`], then the payload with a [`LengthCounter`] or an
//! [`EofScanner`] ([`Receiver`] is either).

use super::ids::ReplId;
use crate::types::num::{parse_i64, write_i64};

/// Length of the EOF mark of a diskless payload (Redis's
/// `CONFIG_RUN_ID_SIZE`).
pub const MARK_LEN: usize = 40;

/// The most bytes a line before the payload may hold before its `\n`.
pub const LINE_MAX: usize = 1024;

/// The header of a payload of known length: `$<len>\r\n`.
pub fn length_header(len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.push(b'$');
    // A payload is a file: its length fits an i64.
    write_i64(&mut out, i64::try_from(len).unwrap_or(i64::MAX));
    out.extend_from_slice(b"\r\n");
    out
}

/// The 40 bytes that end a diskless payload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EofMark([u8; MARK_LEN]);

impl EofMark {
    /// A new mark: 40 random lower-case hex characters from the operating
    /// system's random source (the same generator as [`ReplId::random`]).
    pub fn random() -> EofMark {
        EofMark(*ReplId::random().as_bytes())
    }

    /// The mark with these bytes (as a replica reads it from `$EOF:`).
    pub fn from_bytes(bytes: [u8; MARK_LEN]) -> EofMark {
        EofMark(bytes)
    }

    /// The mark's 40 bytes: what the master writes after the payload.
    pub fn as_bytes(&self) -> &[u8; MARK_LEN] {
        &self.0
    }

    /// The header of a payload ending with this mark: `$EOF:<mark>\r\n`.
    pub fn header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + MARK_LEN + 2);
        out.extend_from_slice(b"$EOF:");
        out.extend_from_slice(&self.0);
        out.extend_from_slice(b"\r\n");
        out
    }
}

impl std::fmt::Debug for EofMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EofMark({})", String::from_utf8_lossy(&self.0))
    }
}

/// A line longer than [`LINE_MAX`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong;

/// Splits bytes into lines as Redis's `syncReadLine` does: a line ends at
/// `\n`, and one `\r` before it is dropped too. Unlike Redis, which cuts a
/// long line silently and reads the rest as the next one, a line of more
/// than [`LINE_MAX`] bytes is an error. Nothing is allocated beyond
/// [`LINE_MAX`] bytes.
#[derive(Debug, Default)]
pub struct LineReader {
    line: Vec<u8>,
    /// The last call returned the line in `line`: clear it first.
    returned: bool,
}

impl LineReader {
    /// A reader with no partial line.
    pub fn new() -> LineReader {
        LineReader::default()
    }

    /// Reads from `bytes`: returns how many were consumed and, when a line
    /// ended within them (its `\n` is the last byte consumed), the line
    /// without its ending. The error comes as soon as more than
    /// [`LINE_MAX`] bytes arrive without a `\n`.
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Result<&[u8], LineTooLong>>) {
        if self.returned {
            self.line.clear();
            self.returned = false;
        }
        let room = LINE_MAX - self.line.len();
        match bytes.iter().position(|&b| b == b'\n') {
            Some(nl) if nl <= room => {
                self.line.extend_from_slice(&bytes[..nl]);
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                self.returned = true;
                (nl + 1, Some(Ok(&self.line)))
            }
            _ if bytes.len() > room => {
                self.returned = true;
                (room + 1, Some(Err(LineTooLong)))
            }
            _ => {
                self.line.extend_from_slice(bytes);
                (bytes.len(), None)
            }
        }
    }

    /// Bytes of an unfinished line held.
    pub fn partial_len(&self) -> usize {
        if self.returned {
            0
        } else {
            self.line.len()
        }
    }
}

/// How the payload announces its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadForm {
    /// `$<n>`: exactly this many bytes.
    Length(u64),
    /// `$EOF:<mark>`: the payload ends where the last 40 bytes received
    /// equal the mark.
    Mark(EofMark),
}

impl PayloadForm {
    /// Redis's log line when the transfer starts (`to parser` for a
    /// straight parse, `to disk` for the file path).
    pub fn start_log(&self, to_parser: bool) -> String {
        let target = if to_parser { "to parser" } else { "to disk" };
        match self {
            PayloadForm::Length(n) => {
                format!("MASTER <-> REPLICA sync: receiving {n} bytes from master {target}")
            }
            PayloadForm::Mark(_) => {
                format!(
                    "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {target}"
                )
            }
        }
    }
}

/// What a line before the payload means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preamble {
    /// An empty line: the master is alive (refresh the transfer timer).
    Keepalive,
    /// The payload starts with the next byte.
    Start(PayloadForm),
    /// The attempt ends; the text is the log line (Redis's wording).
    Abort(String),
}

/// Parses one line before the payload, without its line ending.
pub fn parse_preamble_line(line: &[u8]) -> Preamble {
    let bad = || {
        Preamble::Abort(format!(
            "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), \
             are you sure the host and port are right?",
            String::from_utf8_lossy(line)
        ))
    };
    match line.first() {
        None => Preamble::Keepalive,
        Some(b'-') => Preamble::Abort(format!(
            "MASTER aborted replication with an error: {}",
            String::from_utf8_lossy(&line[1..])
        )),
        Some(b'$') => {
            let rest = &line[1..];
            if let Some(mark) = rest.strip_prefix(b"EOF:") {
                match <[u8; MARK_LEN]>::try_from(mark) {
                    Ok(mark) => Preamble::Start(PayloadForm::Mark(EofMark(mark))),
                    Err(_) => bad(),
                }
            } else {
                // Redis's integer rules; never negative, so below 2^63.
                match parse_i64(rest).and_then(|n| u64::try_from(n).ok()) {
                    Some(n) => Preamble::Start(PayloadForm::Length(n)),
                    None => bad(),
                }
            }
        }
        Some(_) => bad(),
    }
}

/// Reads the lines before the payload from the bytes the master sends.
#[derive(Debug, Default)]
pub struct PreambleReader {
    lines: LineReader,
}

impl PreambleReader {
    /// A reader at the start of a line.
    pub fn new() -> PreambleReader {
        PreambleReader::default()
    }

    /// Reads from `bytes`: how many were consumed, and what a line that
    /// ended within them means. After [`Preamble::Start`] the bytes not
    /// consumed are the payload's first; after [`Preamble::Abort`] the
    /// reader is done.
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Preamble>) {
        let (used, line) = self.lines.feed(bytes);
        let event = line.map(|line| match line {
            Ok(line) => parse_preamble_line(line),
            Err(LineTooLong) => Preamble::Abort(format!(
                "Bad protocol from MASTER, a line of more than {LINE_MAX} bytes, \
                 are you sure the host and port are right?"
            )),
        });
        (used, event)
    }
}

/// Counts a `$<n>` payload: exactly `n` bytes, then the stream.
#[derive(Debug, Clone)]
pub struct LengthCounter {
    total: u64,
    read: u64,
}

/// A chunk split at the payload's end.
#[derive(Debug, PartialEq, Eq)]
pub struct Split<'a> {
    /// The chunk's payload bytes.
    pub payload: &'a [u8],
    /// `Some` when the payload ended in this chunk: the bytes after it
    /// (the stream's first bytes; possibly none).
    pub rest: Option<&'a [u8]>,
}

impl LengthCounter {
    /// A counter for a payload of `total` bytes.
    pub fn new(total: u64) -> LengthCounter {
        LengthCounter { total, read: 0 }
    }

    /// Takes the payload bytes of `chunk`. A zero-length payload ends at
    /// the first call, even with an empty chunk; after the end every call
    /// returns no payload and the whole chunk as the rest.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Split<'a> {
        let left = self.total - self.read;
        let take = usize::try_from(left).map_or(chunk.len(), |l| l.min(chunk.len()));
        self.read += take as u64;
        let (payload, rest) = chunk.split_at(take);
        Split {
            payload,
            rest: self.is_done().then_some(rest),
        }
    }

    /// Payload bytes received.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Payload bytes still to come.
    pub fn left(&self) -> u64 {
        self.total - self.read
    }

    /// The announced length.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether every payload byte has arrived.
    pub fn is_done(&self) -> bool {
        self.read == self.total
    }
}

/// Finds a `$EOF:` payload's end in bytes fed in chunks of any size.
///
/// The payload ends at the first point where the last 40 bytes received
/// equal the mark, however the bytes were split (Redis checks only at the
/// end of each read; a master sends nothing after the mark until the
/// replica's first `REPLCONF ACK`, so the two agree). The last 40 bytes
/// are always held back: every byte passed on is a payload byte.
#[derive(Debug, Clone)]
pub struct EofScanner {
    mark: EofMark,
    held: [u8; MARK_LEN],
    held_len: usize,
    passed: u64,
    ended: bool,
}

impl EofScanner {
    /// A scanner for a payload ending with `mark`.
    pub fn new(mark: EofMark) -> EofScanner {
        EofScanner {
            mark,
            held: [0; MARK_LEN],
            held_len: 0,
            passed: 0,
            ended: false,
        }
    }

    /// Reads `chunk`: appends to `out` the bytes now known to be payload,
    /// and returns `Some(rest)` when the mark ended the payload within it
    /// (`rest`: the chunk's bytes after the mark, which a master should
    /// not send). After the end, every call passes nothing and returns the
    /// whole chunk as the rest.
    pub fn feed<'a>(&mut self, chunk: &'a [u8], out: &mut Vec<u8>) -> Option<&'a [u8]> {
        if self.ended {
            return Some(chunk);
        }
        let held_len = self.held_len;
        let total = held_len + chunk.len();
        match self.find_end(chunk) {
            Some(end) => {
                // `end`: where the mark ends, counted from the first held byte.
                let payload = end - MARK_LEN;
                self.pass(chunk, payload, out);
                self.ended = true;
                self.held_len = 0;
                Some(&chunk[end - held_len..])
            }
            None if total <= MARK_LEN => {
                self.held[held_len..total].copy_from_slice(chunk);
                self.held_len = total;
                None
            }
            None => {
                self.pass(chunk, total - MARK_LEN, out);
                if chunk.len() >= MARK_LEN {
                    self.held.copy_from_slice(&chunk[chunk.len() - MARK_LEN..]);
                } else {
                    // Keep the held bytes' tail, then the whole chunk.
                    let keep = MARK_LEN - chunk.len();
                    self.held.copy_within(held_len - keep..held_len, 0);
                    self.held[keep..].copy_from_slice(chunk);
                }
                self.held_len = MARK_LEN;
                None
            }
        }
    }

    /// Appends the first `n` bytes of held ++ chunk to `out`.
    fn pass(&mut self, chunk: &[u8], n: usize, out: &mut Vec<u8>) {
        let from_held = n.min(self.held_len);
        out.extend_from_slice(&self.held[..from_held]);
        out.extend_from_slice(&chunk[..n - from_held]);
        self.passed += n as u64;
    }

    /// The end of the first mark in held ++ chunk that ends within chunk,
    /// counted from the first held byte.
    fn find_end(&self, chunk: &[u8]) -> Option<usize> {
        let mark = self.mark.as_bytes();
        let held_len = self.held_len;
        // Marks that start among the held bytes: look at them and the
        // chunk's first 40 bytes together.
        if held_len > 0 {
            let mut head = [0u8; 2 * MARK_LEN];
            let take = chunk.len().min(MARK_LEN);
            head[..held_len].copy_from_slice(&self.held[..held_len]);
            head[held_len..held_len + take].copy_from_slice(&chunk[..take]);
            let head = &head[..held_len + take];
            // A mark wholly among the held bytes was seen by an earlier call.
            let first = usize::from(held_len == MARK_LEN);
            for start in first..held_len {
                if head.len() >= start + MARK_LEN && head[start..start + MARK_LEN] == mark[..] {
                    return Some(start + MARK_LEN);
                }
            }
        }
        find(chunk, mark).map(|start| held_len + start + MARK_LEN)
    }

    /// Payload bytes passed on so far.
    pub fn passed(&self) -> u64 {
        self.passed
    }

    /// The bytes held back: the last (up to) 40 received, not yet known to
    /// be payload. When a straight parse finds the payload's own end and
    /// these are 40 bytes that are not the mark, the mark is broken.
    pub fn held(&self) -> &[u8] {
        &self.held[..self.held_len]
    }

    /// Whether the mark was found.
    pub fn is_done(&self) -> bool {
        self.ended
    }
}

/// The start of the first occurrence of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8; MARK_LEN]) -> Option<usize> {
    let last_start = haystack.len().checked_sub(MARK_LEN)?;
    let mut from = 0;
    while from <= last_start {
        let k = haystack[from..=last_start]
            .iter()
            .position(|&b| b == needle[0])?;
        let start = from + k;
        if haystack[start..start + MARK_LEN] == needle[..] {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

/// Receives a payload of either form.
#[derive(Debug, Clone)]
pub enum Receiver {
    /// `$<n>`.
    Length(LengthCounter),
    /// `$EOF:<mark>`.
    Mark(EofScanner),
}

impl Receiver {
    /// A receiver for the payload `form` announces.
    pub fn new(form: PayloadForm) -> Receiver {
        match form {
            PayloadForm::Length(n) => Receiver::Length(LengthCounter::new(n)),
            PayloadForm::Mark(mark) => Receiver::Mark(EofScanner::new(mark)),
        }
    }

    /// Reads `chunk`: appends its payload bytes to `out`; `Some(rest)`
    /// when the payload ended (`rest`: the bytes after it).
    pub fn feed<'a>(&mut self, chunk: &'a [u8], out: &mut Vec<u8>) -> Option<&'a [u8]> {
        match self {
            Receiver::Length(counter) => {
                let split = counter.feed(chunk);
                out.extend_from_slice(split.payload);
                split.rest
            }
            Receiver::Mark(scanner) => scanner.feed(chunk, out),
        }
    }

    /// Payload bytes passed on so far.
    pub fn passed(&self) -> u64 {
        match self {
            Receiver::Length(counter) => counter.read(),
            Receiver::Mark(scanner) => scanner.passed(),
        }
    }

    /// Whether the payload has ended.
    pub fn is_done(&self) -> bool {
        match self {
            Receiver::Length(counter) => counter.is_done(),
            Receiver::Mark(scanner) => scanner.is_done(),
        }
    }
}

#[cfg(test)]
mod tests;
