//! `resp_request`: the request parser (`hozon::resp::Parser`; multibulk
//! and inline requests, as RESP2 and RESP3 clients send them) and the
//! RESP2/RESP3 reply framer (`resp::reply_frame::frame_len`).
//!
//! Input: one control byte, then the bytes a client sends. The control
//! byte picks whether the client is authenticated (bit 7 clear) and the
//! size of the reads the bytes arrive in (bits 0–5, plus one; bit 6: all
//! at once). Properties:
//! - parsing the bytes as they arrive in reads, dropping parsed requests
//!   from the buffer as a server does, gives the same requests and the
//!   same error as parsing them all at once;
//! - every request, encoded again as a multibulk and as a quoted inline
//!   request, parses back to the same arguments, consuming exactly the
//!   encoding;
//! - the parser's heap stays within a bound proportional to the input;
//! - `frame_len` of the input never panics, a frame it finds fits the
//!   input, and no proper prefix of a frame is a frame or an error.

use hozon::persist::aof::encode_command;
use hozon::resp::reply_frame::frame_len;
use hozon::resp::{Limits, Parser, ProtocolError, INLINE_MAX_BYTES};

use super::alloc;

/// Arguments of each request in order, and how parsing ended (an error,
/// or None when the bytes ran out).
type Parsed = (Vec<Vec<Vec<u8>>>, Option<ProtocolError>);

fn parse_at_once(stream: &[u8], authenticated: bool) -> Parsed {
    let mut parser = Parser::new(Limits::default());
    let mut requests = Vec::new();
    // Each request takes at least one byte: the loop is bounded.
    for _ in 0..=stream.len() {
        match parser.next(stream, authenticated) {
            Ok(Some(req)) => requests.push(req.argv(stream).iter().map(|a| a.to_vec()).collect()),
            Ok(None) => return (requests, None),
            Err(e) => return (requests, Some(e)),
        }
    }
    panic!("the parser returned more requests than the input has bytes");
}

fn parse_in_reads(stream: &[u8], authenticated: bool, read_len: usize) -> Parsed {
    let mut parser = Parser::new(Limits::default());
    let mut requests = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    for chunk in stream.chunks(read_len) {
        buf.extend_from_slice(chunk);
        for _ in 0..=stream.len() {
            match parser.next(&buf, authenticated) {
                Ok(Some(req)) => {
                    requests.push(req.argv(&buf).iter().map(|a| a.to_vec()).collect());
                    let n = parser.consumed();
                    buf.drain(..n);
                    parser.consume(n);
                }
                Ok(None) => break,
                Err(e) => return (requests, Some(e)),
            }
        }
    }
    (requests, None)
}

fn inline_encoding(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.push(b'"');
        for &b in arg {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
        out.push(b'"');
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn assert_parses_back(args: &[Vec<u8>], encoding: &[u8], what: &str) {
    let mut parser = Parser::new(Limits::default());
    let req = parser
        .next(encoding, true)
        .unwrap_or_else(|e| panic!("{what} of {args:?} is refused: {e}"))
        .unwrap_or_else(|| panic!("{what} of {args:?} is incomplete"));
    let back: Vec<Vec<u8>> = req.argv(encoding).iter().map(|a| a.to_vec()).collect();
    assert_eq!(back, args, "{what} parses back to other arguments");
    assert_eq!(
        parser.consumed(),
        encoding.len(),
        "{what} not consumed exactly"
    );
}

fn check_frames(stream: &[u8]) {
    if let Ok(Some(n)) = frame_len(stream) {
        assert!(
            n > 0 && n <= stream.len(),
            "frame of {n} bytes in {}",
            stream.len()
        );
        // Every prefix of a small frame; a sample of a large one's.
        let step = (n / 64).max(1);
        for k in (0..n).step_by(step) {
            match frame_len(&stream[..k]) {
                Ok(None) => {}
                other => panic!("prefix {k} of a {n}-byte frame: {other:?}"),
            }
        }
    }
}

/// The check (see the module documentation).
pub fn check(data: &[u8]) {
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let authenticated = ctl & 0x80 == 0;
    let read_len = if ctl & 0x40 != 0 {
        stream.len().max(1)
    } else {
        usize::from(ctl & 0x3f) + 1
    };
    let (whole, peak) = alloc::peak_of(|| parse_at_once(stream, authenticated));
    // Arguments are copied out (twice their bytes at most, with Vec
    // headers per argument of at least one input byte each).
    alloc::assert_bounded("resp parse", peak, stream.len(), 64);
    // An inline request longer than the limit is refused or not
    // depending on how much of it has arrived, as in Redis: compare
    // only inputs that cannot reach the limit.
    if stream.len() <= INLINE_MAX_BYTES {
        let split = parse_in_reads(stream, authenticated, read_len);
        assert_eq!(whole, split, "parsing in reads of {read_len} bytes differs");
    }
    for args in &whole.0 {
        assert!(!args.is_empty(), "a request without arguments was returned");
        let mut multibulk = Vec::new();
        encode_command(&mut multibulk, args);
        assert_parses_back(args, &multibulk, "the multibulk encoding");
        assert_parses_back(args, &inline_encoding(args), "the inline encoding");
    }
    check_frames(stream);
}
