//! Replication ids and positions (docs/replication.md, "Terms" and
//! "Persisting the position").

use std::fmt;
use std::io::Read;

/// Length of a replication id: 40 lower-case hexadecimal characters.
pub const REPLID_LEN: usize = 40;

/// A replication id: one replication history.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplId([u8; REPLID_LEN]);

impl ReplId {
    /// The id Redis prints when there is none: 40 `0`s.
    pub const NONE: ReplId = ReplId([b'0'; REPLID_LEN]);

    /// A new random id from the operating system's random source (Redis's
    /// `getRandomHexChars`); falls back to the process's own generator,
    /// seeded from the clock, if `/dev/urandom` cannot be read.
    pub fn random() -> ReplId {
        let mut bytes = [0u8; REPLID_LEN / 2];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if read.is_err() {
            let mut rng = crate::rand::Rng::new();
            for chunk in bytes.chunks_mut(8) {
                let word = rng.next_u64().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
        let mut id = [0u8; REPLID_LEN];
        for (i, b) in bytes.iter().enumerate() {
            id[2 * i] = HEX[usize::from(b >> 4)];
            id[2 * i + 1] = HEX[usize::from(b & 15)];
        }
        ReplId(id)
    }

    /// Parses an id as a replica or a file gives it: exactly 40 bytes,
    /// hexadecimal (either case; kept as given, compared without case as
    /// Redis does with `strcasecmp`).
    pub fn parse(text: &[u8]) -> Option<ReplId> {
        let id: [u8; REPLID_LEN] = text.try_into().ok()?;
        id.iter().all(u8::is_ascii_hexdigit).then_some(ReplId(id))
    }

    /// The id's 40 characters.
    pub fn as_bytes(&self) -> &[u8; REPLID_LEN] {
        &self.0
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// Redis's comparison of ids (`strcasecmp`).
    pub fn same_as(&self, other: &[u8]) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for ReplId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for ReplId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ReplId({})", self.as_str())
    }
}

/// Where a dataset stands in a replication history: the id, the offset of
/// the last stream byte it includes, and the database the stream had
/// selected after that byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The history.
    pub replid: ReplId,
    /// The offset of the last stream byte the dataset includes.
    pub offset: i64,
    /// The database the stream had selected (0 when it selected none).
    pub stream_db: u32,
}

/// The AOF line that records a position, last in a batch's body:
/// `#repl <replid> <offset> <stream_db>\r\n`, or `#repl none\r\n` when the
/// position ends (docs/replication.md, "Where"). Not `#hz…`: hozon's
/// loader refuses `#hz` annotations it does not know, while it (like
/// Redis) skips other `#` lines, so older versions still load the file.
pub const POSITION_PREFIX: &[u8] = b"#repl ";

/// Encodes the `#repl` line for `position` (None: the position ends).
pub fn encode_position_line(position: Option<&Position>, out: &mut Vec<u8>) {
    out.extend_from_slice(POSITION_PREFIX);
    match position {
        Some(p) => {
            out.extend_from_slice(p.replid.as_bytes());
            out.extend_from_slice(format!(" {} {}\r\n", p.offset, p.stream_db).as_bytes());
        }
        None => out.extend_from_slice(b"none\r\n"),
    }
}

/// Why a `#repl` line does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionLineError(pub String);

impl fmt::Display for PositionLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a `#repl` line without its `\r\n`: `Some(position)`, or `None`
/// for `#repl none`.
pub fn parse_position_line(line: &[u8]) -> Result<Option<Position>, PositionLineError> {
    let bad = |why: &str| {
        PositionLineError(format!(
            "bad #repl line ({why}): {}",
            String::from_utf8_lossy(line)
        ))
    };
    let rest = line
        .strip_prefix(POSITION_PREFIX)
        .ok_or_else(|| bad("no #repl prefix"))?;
    if rest == b"none" {
        return Ok(None);
    }
    let mut fields = rest.split(|&b| b == b' ');
    let (Some(id), Some(offset), Some(db), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(bad("not three fields"));
    };
    let replid = ReplId::parse(id).ok_or_else(|| bad("the id is not 40 hex digits"))?;
    let offset: i64 = number(offset)
        .and_then(|s| s.parse().ok())
        .filter(|&o| o >= 0)
        .ok_or_else(|| bad("the offset is not a non-negative integer"))?;
    let stream_db: u32 = number(db)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("the database is not an integer"))?;
    Ok(Some(Position {
        replid,
        offset,
        stream_db,
    }))
}

/// A decimal field of a `#repl` line: digits with an optional `-`, no `+`.
fn number(field: &[u8]) -> Option<&str> {
    std::str::from_utf8(field)
        .ok()
        .filter(|s| !s.starts_with('+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_40_lowercase_hex_digits_and_differ() {
        let a = ReplId::random();
        let b = ReplId::random();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), REPLID_LEN);
        assert!(a.as_str().bytes().all(|c| HEX.contains(&c)));
        assert_eq!(ReplId::parse(a.as_bytes()), Some(a));
    }

    #[test]
    fn ids_compare_without_case_and_parse_strictly() {
        let id = ReplId::parse(b"0123456789abcdef0123456789abcdef01234567").unwrap();
        assert!(id.same_as(b"0123456789ABCDEF0123456789abcdef01234567"));
        assert!(!id.same_as(b"?"));
        assert_eq!(ReplId::parse(b"0123"), None);
        assert_eq!(
            ReplId::parse(b"0123456789abcdef0123456789abcdef0123456g"),
            None
        );
        assert_eq!(ReplId::NONE.as_str(), "0".repeat(40));
    }

    #[test]
    fn position_lines_round_trip_and_reject_damage() {
        let p = Position {
            replid: ReplId::random(),
            offset: 123_456_789,
            stream_db: 15,
        };
        let mut line = Vec::new();
        encode_position_line(Some(&p), &mut line);
        assert!(line.ends_with(b"\r\n"));
        assert_eq!(parse_position_line(&line[..line.len() - 2]), Ok(Some(p)));
        let mut none = Vec::new();
        encode_position_line(None, &mut none);
        assert_eq!(none, b"#repl none\r\n");
        assert_eq!(parse_position_line(b"#repl none"), Ok(None));
        for bad in [
            &b"#repl"[..],
            b"#repl x 1 0",
            b"#repl 0123456789abcdef0123456789abcdef01234567 -1 0",
            b"#repl 0123456789abcdef0123456789abcdef01234567 +1 0",
            b"#repl 0123456789abcdef0123456789abcdef01234567 1",
            b"#repl 0123456789abcdef0123456789abcdef01234567 1 0 9",
            b"#repl 0123456789abcdef0123456789abcdef01234567 1 -2",
        ] {
            assert!(
                parse_position_line(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
