//! Framing of RESP2/RESP3 replies: finds where one complete reply ends.
//!
//! Used by clients of a RESP server (tests, benchmarks, tools) to read
//! exactly one reply from a stream.

/// Length in bytes of the first complete reply in `buf`, `Ok(None)` when
/// more bytes are needed, `Err` when `buf` does not start with a valid
/// reply. Nesting is limited to `depth_max` levels.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    frame_at(buf, 0, 0)
}

const DEPTH_MAX: usize = 128;

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

fn parse_num(bytes: &[u8]) -> Result<i64, &'static str> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("invalid length in reply")
}

fn frame_at(buf: &[u8], at: usize, depth: usize) -> Result<Option<usize>, &'static str> {
    if depth > DEPTH_MAX {
        return Err("reply nested too deeply");
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(eol) = line_end(buf, at + 1) else {
        return Ok(None);
    };
    let header = &buf[at + 1..eol];
    let after = eol + 2;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(after - at)),
        b'$' | b'=' | b'!' => {
            let len = parse_num(header)?;
            if len < 0 {
                return Ok(Some(after - at));
            }
            let end = after + len as usize + 2;
            if buf.len() < end {
                Ok(None)
            } else {
                Ok(Some(end - at))
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = parse_num(header)?;
            if n < 0 {
                return Ok(Some(after - at));
            }
            let items = if kind == b'%' || kind == b'|' {
                n * 2
            } else {
                n
            };
            let mut pos = after;
            for _ in 0..items {
                match frame_at(buf, pos, depth + 1)? {
                    Some(len) => pos += len,
                    None => return Ok(None),
                }
            }
            // An attribute (`|`) precedes the reply it annotates.
            if kind == b'|' {
                return match frame_at(buf, pos, depth + 1)? {
                    Some(len) => Ok(Some(pos + len - at)),
                    None => Ok(None),
                };
            }
            Ok(Some(pos - at))
        }
        _ => Err("unknown reply type byte"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        assert_eq!(frame_len(b"+OK\r\n"), Ok(Some(5)));
        assert_eq!(frame_len(b"$3\r\nabc\r\n+x"), Ok(Some(9)));
        assert_eq!(frame_len(b"$3\r\nab"), Ok(None));
        assert_eq!(frame_len(b"*2\r\n:1\r\n$-1\r\n"), Ok(Some(13)));
        assert_eq!(frame_len(b"%1\r\n+a\r\n:1\r\n"), Ok(Some(12)));
        assert_eq!(frame_len(b"*2\r\n:1\r\n"), Ok(None));
    }
}
