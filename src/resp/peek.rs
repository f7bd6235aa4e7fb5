//! A read-only look ahead over requests not parsed yet: the second, third
//! and fourth arguments (the key of almost every keyed command, and the
//! member or field of most collection commands: third, or fourth after a
//! score or increment) of each complete multibulk request in a buffer, for
//! prefetch hints. It never changes what the
//! [`Parser`](super::Parser) will return: anything it does not recognise
//! (an inline request, a malformed or incomplete one) ends the look ahead.

/// Fills `out` with the second, third and fourth arguments (empty when
/// absent)
/// of each complete multibulk request in `buf` from `from` on (a request
/// with fewer than two arguments is skipped), stopping when `out` is full,
/// after `max_requests` requests, or at the first request it cannot scan.
/// Returns how many slots it filled.
pub fn key_args<'a>(
    buf: &'a [u8],
    from: usize,
    max_requests: usize,
    out: &mut [[&'a [u8]; 3]],
) -> usize {
    let mut pos = from;
    let mut filled = 0;
    let mut requests = 0;
    while filled < out.len() && requests < max_requests {
        let Some((count, next)) = header(buf, pos, b'*') else {
            break;
        };
        pos = next;
        let mut args: [&[u8]; 3] = [&[], &[], &[]];
        for i in 0..count {
            let Some((len, start)) = header(buf, pos, b'$') else {
                return filled;
            };
            let end = start + len;
            if end + 2 > buf.len() {
                return filled;
            }
            if (1..=3).contains(&i) {
                args[i - 1] = &buf[start..end];
            }
            pos = end + 2;
        }
        if count >= 2 {
            out[filled] = args;
            filled += 1;
        }
        requests += 1;
    }
    filled
}

/// Reads a `<kind><digits>\r\n` line at `pos`: the number (at most 9
/// digits, so a count or length is plausible) and the position after the
/// line.
fn header(buf: &[u8], pos: usize, kind: u8) -> Option<(usize, usize)> {
    if buf.get(pos) != Some(&kind) {
        return None;
    }
    let mut n = 0usize;
    let mut i = pos + 1;
    while i < buf.len() && buf[i].is_ascii_digit() {
        if i - pos > 9 {
            return None;
        }
        n = n * 10 + (buf[i] - b'0') as usize;
        i += 1;
    }
    if i == pos + 1 || buf.get(i) != Some(&b'\r') || buf.get(i + 1) != Some(&b'\n') {
        return None;
    }
    Some((n, i + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(buf: &[u8], from: usize, max: usize) -> Vec<Vec<u8>> {
        let mut out = [[&b""[..]; 3]; 4];
        let n = key_args(buf, from, max, &mut out);
        out[..n].iter().map(|a| a[0].to_vec()).collect()
    }

    #[test]
    fn keys_of_complete_requests_only() {
        let buf = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nx\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\nbb\r\n*2\r\n$3\r\nGET\r\n$3\r\ncc";
        assert_eq!(scan(buf, 0, 16), vec![b"a".to_vec(), b"bb".to_vec()]);
        // From the second request on; and the request cap.
        let second = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nx\r\n".len();
        assert_eq!(scan(buf, second, 16), vec![b"bb".to_vec()]);
        assert_eq!(scan(buf, 0, 1), vec![b"a".to_vec()]);
    }

    #[test]
    fn later_arguments_or_empty() {
        let buf =
            b"*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let mut out = [[&b""[..]; 3]; 4];
        assert_eq!(key_args(buf, 0, 16, &mut out), 2);
        assert_eq!(out[0], [&b"h"[..], &b"f"[..], &b"v"[..]]);
        assert_eq!(out[1], [&b"k"[..], &b""[..], &b""[..]]);
    }

    #[test]
    fn stops_at_what_it_does_not_recognise() {
        assert!(scan(b"GET a\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n", 0, 16).is_empty());
        assert!(scan(b"*2\r\n$3\r\nGET\r\n$x\r\nb\r\n", 0, 16).is_empty());
        assert!(scan(b"*2\r\n$3\r\nGET\r\n$9999999999\r\n", 0, 16).is_empty());
        assert!(scan(b"*2\r\n$3\r\nGET\r\n$1\r\nb", 0, 16).is_empty());
        assert!(scan(b"", 0, 16).is_empty());
    }

    #[test]
    fn fills_at_most_the_output() {
        let one = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let buf: Vec<u8> = one.iter().copied().cycle().take(one.len() * 10).collect();
        assert_eq!(scan(&buf, 0, 16).len(), 4);
    }
}
