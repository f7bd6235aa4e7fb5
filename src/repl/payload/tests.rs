//! Unit tests of the payload framing, the line reader, the length counter and the EOF scanner.
use super::*;
use crate::rand::Rng;

/// A mark whose 40 bytes all differ: no prefix of it is also a suffix.
const MARK: &[u8; MARK_LEN] = b"0123456789abcdefghijklmnopqrstuvwxyzABCD";

fn mark() -> EofMark {
    EofMark::from_bytes(*MARK)
}

/// Feeds `chunks` to a scanner: the payload passed on, and the bytes
/// after the end (the ending chunk's rest and every later chunk), or
/// `None` when the end never came.
fn scan(mark: EofMark, chunks: &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>, EofScanner) {
    let mut scanner = EofScanner::new(mark);
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    for chunk in chunks {
        let before = out.len();
        let rest = scanner.feed(chunk, &mut out);
        if let Some(after) = after.as_mut() {
            assert_eq!(out.len(), before, "nothing passes after the end");
            assert_eq!(rest, Some(*chunk), "after the end a chunk is all rest");
            after.extend_from_slice(chunk);
        } else if let Some(rest) = rest {
            after = Some(rest.to_vec());
        }
    }
    assert_eq!(scanner.passed(), out.len() as u64);
    (out, after, scanner)
}

/// The reference: the payload ends at the first complete mark.
fn expected(mark: &[u8; MARK_LEN], stream: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    match stream.windows(MARK_LEN).position(|w| w == mark) {
        Some(at) => (
            stream[..at].to_vec(),
            Some(stream[at + MARK_LEN..].to_vec()),
        ),
        None => (
            stream[..stream.len().saturating_sub(MARK_LEN)].to_vec(),
            None,
        ),
    }
}

#[test]
fn length_headers_are_dollar_length_crlf() {
    assert_eq!(length_header(0), b"$0\r\n");
    assert_eq!(length_header(1_234_567), b"$1234567\r\n");
    assert_eq!(
        length_header(i64::MAX as u64),
        b"$9223372036854775807\r\n".to_vec()
    );
}

#[test]
fn eof_marks_are_random_hex_and_frame_the_payload() {
    let a = EofMark::random();
    let b = EofMark::random();
    assert_ne!(a, b);
    assert!(a
        .as_bytes()
        .iter()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)));
    let header = a.header();
    assert_eq!(header.len(), 5 + MARK_LEN + 2);
    assert!(header.starts_with(b"$EOF:"));
    assert!(header.ends_with(b"\r\n"));
    assert_eq!(&header[5..45], a.as_bytes());
    // What the master writes, the replica reads back.
    let (used, event) = PreambleReader::new().feed(&header);
    assert_eq!(used, header.len());
    assert_eq!(event, Some(Preamble::Start(PayloadForm::Mark(a))));
    let (used, event) = PreambleReader::new().feed(&length_header(77));
    assert_eq!(used, 5);
    assert_eq!(event, Some(Preamble::Start(PayloadForm::Length(77))));
}

#[test]
fn preamble_lines_follow_redis() {
    assert_eq!(parse_preamble_line(b""), Preamble::Keepalive);
    assert_eq!(
        parse_preamble_line(b"-ERR something went wrong"),
        Preamble::Abort(
            "MASTER aborted replication with an error: ERR something went wrong".into()
        )
    );
    assert_eq!(
        parse_preamble_line(b"-"),
        Preamble::Abort("MASTER aborted replication with an error: ".into())
    );
    assert_eq!(
        parse_preamble_line(b"+OK"),
        Preamble::Abort(
            "Bad protocol from MASTER, the first byte is not '$' (we received '+OK'), \
             are you sure the host and port are right?"
                .into()
        )
    );
    assert_eq!(
        parse_preamble_line(b"$0"),
        Preamble::Start(PayloadForm::Length(0))
    );
    assert_eq!(
        parse_preamble_line(b"$9223372036854775807"),
        Preamble::Start(PayloadForm::Length(i64::MAX as u64))
    );
    let mut eof = b"$EOF:".to_vec();
    eof.extend_from_slice(MARK);
    assert_eq!(
        parse_preamble_line(&eof),
        Preamble::Start(PayloadForm::Mark(mark()))
    );
    let mut short = eof.clone();
    short.pop();
    let mut long = eof.clone();
    long.push(b'x');
    for bad in [
        &b"$"[..],
        b"$-1",
        b"$-0",
        b"$9223372036854775808",
        b"$18446744073709551616",
        b"$01",
        b"$+1",
        b"$ 1",
        b"$1 ",
        b"$1x",
        b"$EOF",
        b"$EOF:",
        &short,
        &long,
        b"x$1",
        b"\r",
    ] {
        let Preamble::Abort(text) = parse_preamble_line(bad) else {
            panic!("{} accepted", String::from_utf8_lossy(bad));
        };
        assert_eq!(
            text,
            format!(
                "Bad protocol from MASTER, the first byte is not '$' (we received '{}'), \
                 are you sure the host and port are right?",
                String::from_utf8_lossy(bad)
            )
        );
    }
}

#[test]
fn lines_end_at_newline_with_an_optional_carriage_return() {
    let mut r = LineReader::new();
    assert_eq!(r.feed(b"\n"), (1, Some(Ok(&b""[..]))));
    assert_eq!(r.feed(b"\r\n"), (2, Some(Ok(&b""[..]))));
    assert_eq!(r.feed(b"+PONG\r\nrest"), (7, Some(Ok(&b"+PONG"[..]))));
    assert_eq!(r.feed(b"a\rb\n"), (4, Some(Ok(&b"a\rb"[..]))));
    assert_eq!(r.feed(b"a\r\r\n"), (4, Some(Ok(&b"a\r"[..]))));
    // Split anywhere, the \r\n too.
    assert_eq!(r.feed(b"+FULL"), (5, None));
    assert_eq!(r.partial_len(), 5);
    assert_eq!(r.feed(b"RESYNC\r"), (7, None));
    assert_eq!(r.feed(b"\nxyz"), (1, Some(Ok(&b"+FULLRESYNC"[..]))));
    assert_eq!(r.partial_len(), 0);
    assert_eq!(r.feed(b""), (0, None));
}

#[test]
fn lines_are_bounded_at_1_kib() {
    let mut r = LineReader::new();
    let mut max = vec![b'a'; LINE_MAX];
    max.push(b'\n');
    let (used, line) = r.feed(&max);
    assert_eq!(used, LINE_MAX + 1);
    assert_eq!(line, Some(Ok(&max[..LINE_MAX])));
    // One byte more, in one piece or in two.
    let mut over = vec![b'a'; LINE_MAX + 1];
    over.push(b'\n');
    assert_eq!(r.feed(&over), (LINE_MAX + 1, Some(Err(LineTooLong))));
    let mut r = LineReader::new();
    assert_eq!(r.feed(&over[..1000]), (1000, None));
    assert_eq!(r.feed(&over[1000..]), (25, Some(Err(LineTooLong))));
    // The error comes without waiting for a newline.
    let mut r = LineReader::new();
    assert_eq!(
        r.feed(&vec![b'$'; 5000]),
        (LINE_MAX + 1, Some(Err(LineTooLong)))
    );
    let mut r = PreambleReader::new();
    assert_eq!(
        r.feed(&vec![b'$'; 5000]).1,
        Some(Preamble::Abort(
            "Bad protocol from MASTER, a line of more than 1024 bytes, \
             are you sure the host and port are right?"
                .into()
        ))
    );
}

#[test]
fn the_preamble_reader_finds_the_payload_start_byte_by_byte() {
    let mut stream = b"\n\n\r\n".to_vec();
    stream.extend_from_slice(&mark().header());
    stream.extend_from_slice(b"REDIS0010");
    for whole in [false, true] {
        let mut r = PreambleReader::new();
        let mut events = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let end = if whole { stream.len() } else { at + 1 };
            let (used, event) = r.feed(&stream[at..end]);
            at += used;
            if let Some(event) = event {
                let start = matches!(event, Preamble::Start(_));
                events.push(event);
                if start {
                    break;
                }
            }
        }
        assert_eq!(
            events,
            [
                Preamble::Keepalive,
                Preamble::Keepalive,
                Preamble::Keepalive,
                Preamble::Start(PayloadForm::Mark(mark()))
            ]
        );
        assert_eq!(&stream[at..], b"REDIS0010");
    }
}

#[test]
fn start_logs_are_redis_texts() {
    assert_eq!(
        PayloadForm::Length(123).start_log(false),
        "MASTER <-> REPLICA sync: receiving 123 bytes from master to disk"
    );
    assert_eq!(
        PayloadForm::Mark(mark()).start_log(true),
        "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to parser"
    );
}

#[test]
fn the_length_counter_stops_after_exactly_n_bytes() {
    let mut c = LengthCounter::new(0);
    assert_eq!(
        c.feed(b""),
        Split {
            payload: b"",
            rest: Some(b"")
        }
    );
    let mut c = LengthCounter::new(0);
    assert_eq!(
        c.feed(b"*1\r\n"),
        Split {
            payload: b"",
            rest: Some(b"*1\r\n")
        }
    );
    let mut c = LengthCounter::new(5);
    assert_eq!(
        c.feed(b"ab"),
        Split {
            payload: b"ab",
            rest: None
        }
    );
    assert_eq!((c.read(), c.left(), c.total()), (2, 3, 5));
    assert_eq!(
        c.feed(b""),
        Split {
            payload: b"",
            rest: None
        }
    );
    assert_eq!(
        c.feed(b"cdefg"),
        Split {
            payload: b"cde",
            rest: Some(b"fg")
        }
    );
    assert!(c.is_done());
    assert_eq!(
        c.feed(b"hi"),
        Split {
            payload: b"",
            rest: Some(b"hi")
        }
    );
    let mut c = LengthCounter::new(3);
    assert_eq!(
        c.feed(b"abc"),
        Split {
            payload: b"abc",
            rest: Some(b"")
        }
    );
    // Nothing is allocated from the announced length.
    let mut c = LengthCounter::new(i64::MAX as u64);
    assert_eq!(c.feed(b"xyz").rest, None);
    assert_eq!(c.left(), i64::MAX as u64 - 3);
}

#[test]
fn the_mark_is_found_split_at_every_position() {
    let payload: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(7)).collect();
    let mut stream = payload.clone();
    stream.extend_from_slice(MARK);
    stream.extend_from_slice(b"*1\r\n");
    for at in 0..=stream.len() {
        let (out, after, scanner) = scan(mark(), &[&stream[..at], &stream[at..]]);
        assert_eq!(out, payload, "split at {at}");
        assert_eq!(after.as_deref(), Some(&b"*1\r\n"[..]), "split at {at}");
        assert!(scanner.is_done());
        assert_eq!(scanner.held(), b"");
    }
    // Every three-piece split of a shorter stream.
    let mut stream = payload[..30].to_vec();
    stream.extend_from_slice(MARK);
    for i in 0..=stream.len() {
        for j in i..=stream.len() {
            let (out, after, _) = scan(mark(), &[&stream[..i], &stream[i..j], &stream[j..]]);
            assert_eq!(out, &payload[..30], "split at {i}, {j}");
            assert_eq!(after.as_deref(), Some(&b""[..]), "split at {i}, {j}");
        }
    }
    // One byte at a time.
    let chunks: Vec<&[u8]> = stream.chunks(1).collect();
    let (out, after, _) = scan(mark(), &chunks);
    assert_eq!(out, &payload[..30]);
    assert_eq!(after.as_deref(), Some(&b""[..]));
}

#[test]
fn payloads_shorter_than_the_mark() {
    for len in [0, 1, 2, 39, 40, 41] {
        let payload = vec![b'x'; len];
        let mut stream = payload.clone();
        stream.extend_from_slice(MARK);
        for at in 0..=stream.len() {
            let (out, after, _) = scan(mark(), &[&stream[..at], &stream[at..]]);
            assert_eq!(out, payload, "length {len}, split at {at}");
            assert_eq!(after.as_deref(), Some(&b""[..]));
        }
    }
}

#[test]
fn prefixes_of_the_mark_in_the_payload_are_payload() {
    let mut payload = Vec::new();
    for k in 1..MARK_LEN {
        payload.extend_from_slice(&MARK[..k]);
        payload.push(b'!');
    }
    // And the payload ends with a prefix of the mark, right before it.
    for k in 0..MARK_LEN {
        let mut p = payload.clone();
        p.extend_from_slice(&MARK[..k]);
        let mut stream = p.clone();
        stream.extend_from_slice(MARK);
        for size in [1, 2, 3, 7, 39, 40, 41, 64, 4096] {
            let chunks: Vec<&[u8]> = stream.chunks(size).collect();
            let (out, after, _) = scan(mark(), &chunks);
            assert_eq!(out, p, "prefix {k}, chunks of {size}");
            assert_eq!(after.as_deref(), Some(&b""[..]));
        }
    }
}

#[test]
fn a_mark_of_one_repeated_byte_ends_at_its_first_occurrence() {
    let m = EofMark::from_bytes([b'a'; MARK_LEN]);
    let stream = [b'a'; 45];
    for at in 0..=stream.len() {
        let (out, after, _) = scan(m, &[&stream[..at], &stream[at..]]);
        assert_eq!(out, b"");
        assert_eq!(after.as_deref(), Some(&b"aaaaa"[..]));
    }
    let mut stream = b"bab".to_vec();
    stream.extend_from_slice(&[b'a'; 41]);
    let (out, after, _) = scan(m, &[&stream[..2], &stream[2..20], &stream[20..]]);
    assert_eq!(out, b"bab");
    assert_eq!(after.as_deref(), Some(&b"a"[..]));
}

#[test]
fn a_payload_without_the_mark_never_ends_and_holds_back_40_bytes() {
    let payload: Vec<u8> = (0..=255u8).collect();
    for size in [1, 5, 40, 100, 1000] {
        let chunks: Vec<&[u8]> = payload.chunks(size).collect();
        let (out, after, scanner) = scan(mark(), &chunks);
        assert_eq!(after, None);
        assert!(!scanner.is_done());
        assert_eq!(out, &payload[..256 - MARK_LEN]);
        assert_eq!(scanner.held(), &payload[256 - MARK_LEN..]);
    }
    // Shorter than the mark: nothing passes.
    let (out, after, scanner) = scan(mark(), &[b"REDIS", b"0010"]);
    assert_eq!((out, after), (Vec::new(), None));
    assert_eq!(scanner.held(), b"REDIS0010");
    // A wrong mark: 40 bytes that are not it stay held.
    let mut stream = b"payload".to_vec();
    stream.extend_from_slice(&EofMark::random().as_bytes()[..]);
    let (out, after, scanner) = scan(mark(), &[&stream]);
    assert_eq!((out.as_slice(), after), (&b"payload"[..], None));
    assert_eq!(scanner.held().len(), MARK_LEN);
}

#[test]
fn the_scanner_matches_the_reference_on_random_streams() {
    let mut rng = Rng::with_seed(25);
    for round in 0..2000 {
        // Bytes drawn mostly from the mark's first few, so partial marks
        // are everywhere.
        let m = if round % 2 == 0 {
            *MARK
        } else {
            *EofMark::random().as_bytes()
        };
        let len = rng.index(300);
        let mut stream: Vec<u8> = (0..len)
            .map(|_| match rng.below(4) {
                0 => rng.below(256) as u8,
                _ => m[rng.index(3)],
            })
            .collect();
        // Runs of the mark's prefixes, and usually the mark itself.
        for _ in 0..rng.below(4) {
            let at = rng.index(stream.len() + 1);
            let k = rng.index(MARK_LEN + 1);
            let piece = if rng.below(3) == 0 { &m[..] } else { &m[..k] };
            stream.splice(at..at, piece.iter().copied());
        }
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let most = if rng.below(2) == 0 { 8 } else { 120 };
            let size = 1 + rng.index(most);
            let end = (at + size).min(stream.len());
            chunks.push(&stream[at..end]);
            at = end;
        }
        let (out, after, _) = scan(EofMark::from_bytes(m), &chunks);
        assert_eq!((out, after), expected(&m, &stream), "round {round}");
    }
}

#[test]
fn the_receiver_handles_both_forms() {
    let mut r = Receiver::new(PayloadForm::Length(5));
    let mut out = Vec::new();
    assert_eq!(r.feed(b"RED", &mut out), None);
    assert_eq!(r.feed(b"IS*1", &mut out), Some(&b"*1"[..]));
    assert_eq!(
        (out.as_slice(), r.passed(), r.is_done()),
        (&b"REDIS"[..], 5, true)
    );
    let mut r = Receiver::new(PayloadForm::Mark(mark()));
    let mut out = Vec::new();
    let mut stream = b"REDIS".to_vec();
    stream.extend_from_slice(MARK);
    assert_eq!(r.feed(&stream[..20], &mut out), None);
    assert!(!r.is_done());
    assert_eq!(r.feed(&stream[20..], &mut out), Some(&b""[..]));
    assert_eq!(
        (out.as_slice(), r.passed(), r.is_done()),
        (&b"REDIS"[..], 5, true)
    );
}
