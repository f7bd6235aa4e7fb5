//! The RESP codec: request parsing with Redis's limits and errors, and a
//! reply framer. Knows nothing of keys or commands.
//!
//! Requests come as multibulk arrays (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or
//! as inline commands (`GET k\r\n`, what telnet sends). The parser is
//! resumable: it keeps its position in a partly received request, so a
//! request arriving in many reads is scanned once, and it never allocates
//! for bytes it has not received (a declared bulk length only bounds what
//! is accepted).

pub mod peek;
pub mod reply_frame;

use std::ops::Range;

/// Longest inline request, and longest count line, Redis accepts (64 KiB).
pub const INLINE_MAX_BYTES: usize = 64 * 1024;
/// Largest multibulk count Redis accepts (`INT_MAX`).
pub const MULTIBULK_MAX: i64 = i32::MAX as i64;
/// Largest multibulk count accepted before authentication.
pub const UNAUTHENTICATED_MULTIBULK_MAX: i64 = 10;
/// Largest bulk length accepted before authentication.
pub const UNAUTHENTICATED_BULK_MAX: i64 = 16384;

/// Limits a parser enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `proto-max-bulk-len` (512 MB).
    pub max_bulk_len: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
        }
    }
}

/// A protocol error. The text is the exact error Redis replies with
/// (without the leading `-ERR `); the connection is closed afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

impl ProtocolError {
    /// The full error reply text (`ERR Protocol error: …`).
    pub fn reply_text(&self) -> String {
        format!("ERR {}", self.0)
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// One argument of a parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// A byte range of the input buffer (multibulk arguments).
    Range(Range<usize>),
    /// An owned argument (inline requests, after unquoting).
    Owned(Vec<u8>),
}

/// A complete request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The arguments, command name first.
    pub args: Vec<Arg>,
}

impl Request {
    /// Resolves the arguments against the buffer they were parsed from.
    pub fn argv<'a>(&'a self, buf: &'a [u8]) -> Vec<&'a [u8]> {
        self.argv_in(buf, Vec::new())
    }

    /// [`Request::argv`] into `scratch`'s allocation (emptied first; see
    /// [`reuse_argv`]).
    pub fn argv_in<'a>(&'a self, buf: &'a [u8], scratch: Vec<&[u8]>) -> Vec<&'a [u8]> {
        let mut argv = reuse_argv(scratch);
        argv.reserve_exact(self.args.len());
        argv.extend(self.args.iter().map(|a| match a {
            Arg::Range(r) => &buf[r.clone()],
            Arg::Owned(v) => v.as_slice(),
        }));
        argv
    }
}

/// Empties an argument vector and gives its allocation a new lifetime,
/// so one allocation serves request after request although each
/// request's arguments borrow a different buffer. (Collecting an emptied
/// vector's iterator into one of the same layout reuses its allocation.)
pub fn reuse_argv<'b>(mut argv: Vec<&[u8]>) -> Vec<&'b [u8]> {
    argv.clear();
    argv.into_iter().map(|_| -> &'b [u8] { &[] }).collect()
}

/// A resumable request parser over a growing buffer.
///
/// Call [`Parser::next`] with the whole unconsumed buffer; it returns the
/// next complete request (ranges relative to that buffer) or `None` when
/// more bytes are needed. After the caller drops `n` bytes from the front of
/// its buffer it must call [`Parser::consume`] with `n`.
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    /// Start of the request being parsed.
    start: usize,
    /// Parse position.
    pos: usize,
    /// Arguments still expected in the current multibulk (0: none started).
    remaining: i64,
    /// Arguments of the current multibulk so far.
    args: Vec<Arg>,
    /// An emptied argument vector given back by [`Parser::recycle`]: the
    /// next multibulk fills it rather than allocating its own.
    spare: Vec<Arg>,
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .iter()
        .position(|&b| b == b'\r')
        .map(|i| from + i)
}

fn parse_len(line: &[u8]) -> Option<i64> {
    // Redis uses string2ll here, which also accepts "-1" style negatives.
    crate::types::num::parse_i64(line)
}

impl Parser {
    /// A parser with `limits`.
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            ..Parser::default()
        }
    }

    /// Position up to which the buffer has been fully parsed into returned
    /// requests (bytes before it may be dropped).
    pub fn consumed(&self) -> usize {
        self.start
    }

    /// Tells the parser that `n` bytes were removed from the front of the
    /// buffer (n ≤ [`Parser::consumed`]).
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.start, "consume beyond the parsed requests");
        self.start -= n;
        self.pos -= n;
        for arg in &mut self.args {
            if let Arg::Range(r) = arg {
                *r = r.start - n..r.end - n;
            }
        }
    }

    /// Gives back the request that ended at the current consumed position
    /// and began at `start` (a [`Parser::consumed`] value taken before the
    /// [`Parser::next`] that returned it): the next call parses it again.
    /// The server uses it for a command that must wait (a client pause).
    pub fn unread(&mut self, start: usize) {
        assert!(
            start <= self.start && self.pos == self.start && self.remaining == 0,
            "unread only right after a complete request"
        );
        self.start = start;
        self.pos = start;
    }

    /// Gives a request's argument vector back once the caller is done
    /// with it, for the next request to reuse (a pipelined batch then
    /// allocates none per request). Vectors above 64 slots are dropped.
    pub fn recycle(&mut self, request: Request) {
        let mut args = request.args;
        if args.capacity() <= 64 && args.capacity() > self.spare.capacity() {
            args.clear();
            self.spare = args;
        }
    }

    /// True when a request has been partly received.
    pub fn in_request(&self) -> bool {
        self.pos > self.start
    }

    /// Parses the next complete request from `buf`.
    pub fn next(
        &mut self,
        buf: &[u8],
        authenticated: bool,
    ) -> Result<Option<Request>, ProtocolError> {
        loop {
            if self.pos >= buf.len() {
                return Ok(None);
            }
            let parsed = if self.remaining == 0 && self.args.is_empty() && buf[self.pos] != b'*' {
                self.inline(buf)?
            } else {
                self.multibulk(buf, authenticated)?
            };
            match parsed {
                None => return Ok(None),
                Some(req) if req.args.is_empty() => continue, // empty line or *0
                Some(req) => return Ok(Some(req)),
            }
        }
    }

    fn finish(&mut self, args: Vec<Arg>) -> Option<Request> {
        self.start = self.pos;
        self.remaining = 0;
        Some(Request { args })
    }

    fn inline(&mut self, buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
        let Some(nl) = buf[self.pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| self.pos + i)
        else {
            if buf.len() - self.pos > INLINE_MAX_BYTES {
                return Err(ProtocolError("Protocol error: too big inline request"));
            }
            return Ok(None);
        };
        let mut line = &buf[self.pos..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let args = split_args(line).ok_or(ProtocolError(
            "Protocol error: unbalanced quotes in request",
        ))?;
        self.pos = nl + 1;
        Ok(self.finish(args.into_iter().map(Arg::Owned).collect()))
    }

    fn multibulk(
        &mut self,
        buf: &[u8],
        authenticated: bool,
    ) -> Result<Option<Request>, ProtocolError> {
        if self.remaining == 0 {
            // The count line: *<n>\r\n
            let Some(cr) = find_crlf(buf, self.pos) else {
                if buf.len() - self.pos > INLINE_MAX_BYTES {
                    return Err(ProtocolError("Protocol error: too big mbulk count string"));
                }
                return Ok(None);
            };
            if cr + 1 >= buf.len() {
                return Ok(None); // the \n has not arrived
            }
            let count = parse_len(&buf[self.pos + 1..cr]);
            let count = match count {
                Some(c) if c <= MULTIBULK_MAX => c,
                _ => return Err(ProtocolError("Protocol error: invalid multibulk length")),
            };
            if !authenticated && count > UNAUTHENTICATED_MULTIBULK_MAX {
                return Err(ProtocolError(
                    "Protocol error: unauthenticated multibulk length",
                ));
            }
            self.pos = cr + 2;
            if count <= 0 {
                return Ok(self.finish(Vec::new()));
            }
            self.remaining = count;
            // Reserve by what is plausible, never by the declared count.
            self.args = std::mem::take(&mut self.spare);
            self.args.reserve_exact(count.min(1024) as usize);
        }
        while self.remaining > 0 {
            if self.pos >= buf.len() {
                return Ok(None);
            }
            if buf[self.pos] != b'$' {
                return Err(ProtocolError(expected_dollar(buf[self.pos])));
            }
            let Some(cr) = find_crlf(buf, self.pos) else {
                if buf.len() - self.pos > INLINE_MAX_BYTES {
                    return Err(ProtocolError("Protocol error: too big bulk count string"));
                }
                return Ok(None);
            };
            let len = match parse_len(&buf[self.pos + 1..cr]) {
                Some(l) if l >= 0 && l <= self.limits.max_bulk_len => l,
                _ => return Err(ProtocolError("Protocol error: invalid bulk length")),
            };
            if !authenticated && len > UNAUTHENTICATED_BULK_MAX {
                return Err(ProtocolError("Protocol error: unauthenticated bulk length"));
            }
            let data_start = cr + 2;
            let data_end = data_start + len as usize;
            if buf.len() < data_end + 2 {
                return Ok(None);
            }
            // Redis does not check the trailing CRLF's bytes, only skips them.
            push_range(&mut self.args, data_start, data_end);
            self.pos = data_end + 2;
            self.remaining -= 1;
        }
        let args = std::mem::take(&mut self.args);
        Ok(self.finish(args))
    }
}

/// Appends `Arg::Range(start..end)` with its capacity made first, so the
/// value is written straight into the vector: pushed as one expression, it
/// was built on the stack in three 8-byte stores and copied with a 16-byte
/// load, which cannot be forwarded from them (a store-forwarding stall that
/// perf put at 30% of `Parser::next`).
#[inline(always)]
fn push_range(args: &mut Vec<Arg>, start: usize, end: usize) {
    args.reserve(1);
    let len = args.len();
    // SAFETY: `reserve(1)` made room for one more element at `len`, and
    // `set_len` covers exactly the element just written.
    unsafe {
        let slot = args.as_mut_ptr().add(len);
        std::ptr::write(slot, Arg::Range(start..end));
        args.set_len(len + 1);
    }
}

fn expected_dollar(got: u8) -> &'static str {
    leak_expected(got)
}

fn leak_expected(got: u8) -> &'static str {
    // The error names the byte received; one string per byte value is built
    // once so the error type stays `&'static str` and allocation-free.
    use std::sync::OnceLock;
    static TABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..=255u8)
            .map(|b| {
                let s = format!("Protocol error: expected '$', got '{}'", b as char);
                &*Box::leak(s.into_boxed_str())
            })
            .collect()
    });
    table[got as usize]
}

/// Splits an inline request into arguments the way Redis's `sdssplitargs`
/// does: whitespace separates arguments; `"…"` supports `\n \r \t \b \a \\
/// \"` and `\xHH`; `'…'` supports `\'`; a closing quote must be followed by
/// whitespace or the end. Returns `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    current.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if line[i] == b'\\' && i + 1 < n {
                    i += 1;
                    current.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if line[i] == b'"' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(line[i]);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                if line[i] == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    current.push(b'\'');
                } else if line[i] == b'\'' {
                    if i + 1 < n && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(line[i]);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        i += 1;
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => current.push(c),
                }
            }
            i += 1;
        }
        args.push(current);
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c)
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = Parser::new(Limits::default());
        let mut out = Vec::new();
        while let Some(req) = p.next(input, true)? {
            out.push(req.argv(input).iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    /// A batch parsed with recycling gives the same requests, and the
    /// requests after the first fill the first's vectors (seen by their
    /// capacity: the 3-argument SET's, where a 2-argument GET would
    /// allocate 2 slots).
    #[test]
    fn recycled_vectors_serve_the_next_requests() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nDEL\r\n$1\r\na\r\n";
        let mut p = Parser::new(Limits::default());
        let (mut scratch, mut got) = (Vec::new(), Vec::new());
        let (mut args_cap, mut argv_cap) = (Vec::new(), Vec::new());
        while let Some(req) = p.next(input, true).unwrap() {
            args_cap.push(req.args.capacity());
            let argv = req.argv_in(input, std::mem::take(&mut scratch));
            argv_cap.push(argv.capacity());
            got.push(argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            scratch = reuse_argv(argv);
            p.recycle(req);
        }
        assert_eq!(got, parse_all(input).unwrap());
        assert_eq!(args_cap, [3, 3, 3]);
        assert_eq!(argv_cap, [3, 3, 3]);
    }

    #[test]
    fn multibulk_and_inline() {
        let reqs =
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET a \"b c\"\r\n\r\n*0\r\nPING\n").unwrap();
        assert_eq!(
            reqs,
            vec![
                vec![b"GET".to_vec(), b"k".to_vec()],
                vec![b"SET".to_vec(), b"a".to_vec(), b"b c".to_vec()],
                vec![b"PING".to_vec()],
            ]
        );
    }

    #[test]
    fn byte_at_a_time_equals_whole() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\n*1\r\n$4\r\nPING\r\n";
        let mut p = Parser::new(Limits::default());
        let mut buf = Vec::new();
        let mut got = Vec::new();
        for &b in input.iter() {
            buf.push(b);
            while let Some(req) = p.next(&buf, true).unwrap() {
                got.push(
                    req.argv(&buf)
                        .iter()
                        .map(|a| a.to_vec())
                        .collect::<Vec<_>>(),
                );
                let n = p.consumed();
                buf.drain(..n);
                p.consume(n);
            }
        }
        assert_eq!(got, parse_all(input).unwrap());
    }

    #[test]
    fn errors_match_redis() {
        assert_eq!(
            parse_all(b"*abc\r\n").unwrap_err().0,
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n+foo\r\n").unwrap_err().0,
            "Protocol error: expected '$', got '+'"
        );
        assert_eq!(
            parse_all(b"*1\r\n$-5\r\n").unwrap_err().0,
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n$536870913\r\n").unwrap_err().0,
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse_all(b"SET \"a\r\n").unwrap_err().0,
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            parse_all(&vec![b'a'; 70_000]).unwrap_err().0,
            "Protocol error: too big inline request"
        );
    }

    #[test]
    fn declared_sizes_allocate_nothing_up_front() {
        // A huge declared count and length with no data is just "incomplete".
        let mut p = Parser::new(Limits::default());
        assert_eq!(
            p.next(b"*2147483647\r\n$536870912\r\nab", true).unwrap(),
            None
        );
        assert!(p.args.capacity() <= 1024);
    }

    #[test]
    fn split_args_quotes() {
        assert_eq!(
            split_args(b"a 'b c' \"\\x41\\n\"").unwrap(),
            vec![b"a".to_vec(), b"b c".to_vec(), b"A\n".to_vec()]
        );
        assert_eq!(split_args(b"\"a\"b"), None);
        assert_eq!(split_args(b"'a"), None);
    }
}
