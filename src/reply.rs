//! [`Reply`]: what a command returns, and its RESP2/RESP3 encoding.

use std::borrow::Cow;

use crate::types::num;

/// A command's reply, independent of protocol version.
///
/// RESP2 and RESP3 differ in how some shapes are written (maps are flat
/// arrays in RESP2, doubles are bulk strings, the two nulls differ); the
/// encoder picks per client, so commands build one `Reply` for both.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK` and other status replies.
    Simple(Cow<'static, str>),
    /// An error; the text starts with its code (`ERR`, `WRONGTYPE`, …).
    Error(Cow<'static, str>),
    /// `:` integer.
    Int(i64),
    /// `$` bulk string.
    Bulk(Vec<u8>),
    /// Null bulk string (`$-1` in RESP2, `_` in RESP3).
    Null,
    /// Null array (`*-1` in RESP2, `_` in RESP3).
    NullArray,
    /// `*` array.
    Array(Vec<Reply>),
    /// `%` map in RESP3, a flat array of key, value, … in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// `~` set in RESP3, an array in RESP2.
    Set(Vec<Reply>),
    /// `,` double in RESP3, a bulk string (`%.17g`) in RESP2.
    Double(f64),
    /// A double printed as Redis's `addReplyHumanLongDouble` prints it
    /// (`%.17Lf` without trailing zeros: GEOPOS, WITHCOORD): `,` double in
    /// RESP3, a bulk string in RESP2.
    HumanDouble(f64),
    /// `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    Bool(bool),
    /// `=` verbatim string with a 3-letter format in RESP3, bulk in RESP2.
    Verbatim([u8; 3], Vec<u8>),
    /// `(` big number in RESP3, a bulk string in RESP2 (what a script's
    /// `{big_number=...}` returns).
    BigNumber(String),
    /// `>` push message in RESP3 (an array in RESP2).
    Push(Vec<Reply>),
    /// Several replies written back to back (SUBSCRIBE confirms each
    /// channel with its own push message); nothing when empty.
    Frames(Vec<Reply>),
    /// A reply already encoded, for whichever protocol was in force when
    /// it was produced (a command in EXEC after HELLO switched protocols).
    Raw(Vec<u8>),
}

impl Reply {
    /// `+OK`.
    pub const fn ok() -> Reply {
        Reply::Simple(Cow::Borrowed("OK"))
    }

    /// A status reply from a static string.
    pub const fn simple(s: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(s))
    }

    /// An error from a static string (must include the code, e.g. `ERR …`).
    pub const fn err(s: &'static str) -> Reply {
        Reply::Error(Cow::Borrowed(s))
    }

    /// An error from a formatted string.
    pub fn error(s: impl Into<String>) -> Reply {
        Reply::Error(Cow::Owned(s.into()))
    }

    /// A bulk reply copying `b`.
    pub fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(b.to_vec())
    }

    /// True for push messages (and frames made only of them), which reach
    /// the client even with CLIENT REPLY OFF, as Redis's pushes do.
    pub fn is_push(&self) -> bool {
        match self {
            Reply::Push(_) => true,
            Reply::Frames(items) => !items.is_empty() && items.iter().all(Reply::is_push),
            _ => false,
        }
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the RESP encoding of this reply for protocol `resp` (2 or 3).
    pub fn encode(&self, resp: u8, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => {
                out.push(b'+');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(s) => {
                out.push(b'-');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(n) => encode_int(out, b':', *n),
            Reply::Bulk(b) => encode_bulk(out, b),
            Reply::Null => {
                if resp >= 3 {
                    out.extend_from_slice(b"_\r\n")
                } else {
                    out.extend_from_slice(b"$-1\r\n")
                }
            }
            Reply::NullArray => {
                if resp >= 3 {
                    out.extend_from_slice(b"_\r\n")
                } else {
                    out.extend_from_slice(b"*-1\r\n")
                }
            }
            Reply::Array(items) => {
                encode_int(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Set(items) => {
                encode_int(out, if resp >= 3 { b'~' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Push(items) => {
                encode_int(out, if resp >= 3 { b'>' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Frames(items) => {
                for item in items {
                    item.encode(resp, out);
                }
            }
            Reply::Raw(bytes) => out.extend_from_slice(bytes),
            Reply::Map(pairs) => {
                if resp >= 3 {
                    encode_int(out, b'%', pairs.len() as i64);
                } else {
                    encode_int(out, b'*', pairs.len() as i64 * 2);
                }
                for (k, v) in pairs {
                    k.encode(resp, out);
                    v.encode(resp, out);
                }
            }
            Reply::Double(d) => {
                let text = num::format_g17(*d);
                if resp >= 3 {
                    out.push(b',');
                    out.extend_from_slice(text.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(out, text.as_bytes());
                }
            }
            Reply::HumanDouble(d) => {
                let text = crate::types::long_double::Ld::from_f64(*d).to_human();
                if resp >= 3 {
                    out.push(b',');
                    out.extend_from_slice(text.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(out, text.as_bytes());
                }
            }
            Reply::Bool(b) => {
                if resp >= 3 {
                    out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::BigNumber(text) => {
                if resp >= 3 {
                    out.push(b'(');
                    out.extend_from_slice(text.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(out, text.as_bytes());
                }
            }
            Reply::Verbatim(format, body) => {
                if resp >= 3 {
                    encode_int(out, b'=', body.len() as i64 + 4);
                    out.extend_from_slice(format);
                    out.push(b':');
                    out.extend_from_slice(body);
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(out, body);
                }
            }
        }
    }

    /// The RESP encoding as a new buffer.
    pub fn to_resp(&self, resp: u8) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(resp, &mut out);
        out
    }
}

fn encode_int(out: &mut Vec<u8>, prefix: u8, n: i64) {
    out.push(prefix);
    num::write_i64(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends `$<len>\r\n<bytes>\r\n`.
pub fn encode_bulk(out: &mut Vec<u8>, b: &[u8]) {
    encode_int(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

impl From<i64> for Reply {
    fn from(n: i64) -> Self {
        Reply::Int(n)
    }
}

impl From<usize> for Reply {
    fn from(n: usize) -> Self {
        Reply::Int(n as i64)
    }
}

impl From<Vec<u8>> for Reply {
    fn from(b: Vec<u8>) -> Self {
        Reply::Bulk(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_and_resp3_shapes() {
        let map = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Int(1))]);
        assert_eq!(map.to_resp(2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(map.to_resp(3), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(Reply::Null.to_resp(2), b"$-1\r\n");
        assert_eq!(Reply::NullArray.to_resp(2), b"*-1\r\n");
        assert_eq!(Reply::Null.to_resp(3), b"_\r\n");
        assert_eq!(Reply::Double(1.5).to_resp(2), b"$3\r\n1.5\r\n");
        assert_eq!(Reply::Double(1.5).to_resp(3), b",1.5\r\n");
        assert_eq!(
            Reply::Verbatim(*b"txt", b"hi".to_vec()).to_resp(3),
            b"=6\r\ntxt:hi\r\n"
        );
    }
}
