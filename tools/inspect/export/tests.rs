//! Unit tests of `get` and `export`.

use super::json::{json_bytes, json_score, plain_run, ESCAPED};
use super::text::score_text;
use super::*;

#[test]
fn escaping_round_trips_every_byte() {
    let all: Vec<u8> = (0..=255u8).collect();
    let mut q = Vec::new();
    json_bytes(&mut q, &all);
    // JSON-decoding only undoes `\\` and `\"` here (no other escapes
    // are produced), then `unescape` restores the bytes.
    let text = std::str::from_utf8(&q[1..q.len() - 1]).expect("ASCII");
    let decoded = text
        .replace("\\\\", "\u{0}")
        .replace("\\\"", "\"")
        .replace('\u{0}', "\\");
    assert_eq!(unescape(decoded.as_bytes()).expect("valid"), all);
}

#[test]
fn rdb_string_lengths_of_every_encoding() {
    let mut long = vec![0x80, 0, 0, 0x01, 0];
    long.extend(std::iter::repeat_n(b'x', 256));
    let mut cases: Vec<(Vec<u8>, Option<usize>)> = vec![
        (vec![3, b'a', b'b', b'c', 9], Some(4)),
        (vec![0x40, 2, b'a', b'b'], Some(4)),
        (long, Some(261)),
        (vec![0xc0, 7], Some(2)),
        (vec![0xc1, 7, 0], Some(3)),
        (vec![0xc2, 7, 0, 0, 0], Some(5)),
        // LZF: compressed length 2, plain length 5, two bytes.
        (vec![0xc3, 2, 5, 1, 2, 99], Some(5)),
        (vec![3, b'a'], None),
        (vec![0xc4], None),
        (vec![], None),
    ];
    cases.push((vec![0x81, 0, 0, 0, 0, 0, 0, 0, 1, b'z'], Some(10)));
    for (data, want) in cases {
        assert_eq!(rdb_string_len(&data), want, "{data:?}");
    }
}

#[test]
fn plain_run_stops_at_the_first_byte_json_bytes_escapes() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..40 {
        for _ in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Mostly printable, sometimes any byte.
                    if rng.is_multiple_of(9) {
                        (rng >> 8) as u8
                    } else {
                        0x20 + ((rng >> 8) % 95) as u8
                    }
                })
                .collect();
            let want = bytes
                .iter()
                .position(|&b| ESCAPED[usize::from(b)])
                .unwrap_or(bytes.len());
            assert_eq!(plain_run(&bytes), want, "{bytes:?}");
        }
    }
    for b in 0..=255u8 {
        let mut bytes = b"abcdefghijklmnop".to_vec();
        bytes[9] = b;
        let want = if ESCAPED[usize::from(b)] { 9 } else { 16 };
        assert_eq!(plain_run(&bytes), want, "byte {b:#04x}");
    }
}

#[test]
fn json_score_matches_score_text() {
    let scores = [
        0.0,
        -0.0,
        1.0,
        -3.0,
        0.1,
        1e-5,
        9.99e-6,
        1e17,
        1e16,
        -1e17,
        5e-324,
        1e300,
        f64::MAX,
        f64::MIN_POSITIVE,
        123.456,
        3.0,
        -42.0,
        99_999.0,
        9_007_199_254_740_991.0,
        9_007_199_254_740_992.0,
        -9_007_199_254_740_993.0,
        1e15,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    for s in scores {
        let mut b = Vec::new();
        json_score(&mut b, s);
        let want = if s.is_finite() {
            score_text(s)
        } else {
            format!("\"{}\"", score_text(s))
        };
        assert_eq!(String::from_utf8(b).unwrap(), want, "score {s:?}");
    }
    // Whole numbers of every magnitude, and their neighbours.
    let mut x = 1.0f64;
    while x < 1e18 {
        for s in [x, -x, x + 1.0, x - 1.0, x * 0.5, x + 0.5] {
            let mut b = Vec::new();
            json_score(&mut b, s);
            assert_eq!(String::from_utf8(b).unwrap(), score_text(s), "score {s:?}");
        }
        x *= 3.0;
    }
    // Multiples of 1/16 up to past the exact range.
    let mut x = 1.0f64 / 16.0;
    while x < 1e14 {
        for s in [
            x,
            -x,
            x + 0.25,
            x + 0.0625,
            -(x + 0.75),
            x + 0.5,
            x * 1.5,
            x + 0.03125,
        ] {
            let mut b = Vec::new();
            json_score(&mut b, s);
            assert_eq!(String::from_utf8(b).unwrap(), score_text(s), "score {s:?}");
        }
        x = x * 1.7 + 0.0625;
    }
}

#[test]
fn scores_read_back_exactly() {
    for v in [
        0.0,
        -0.0,
        1.0,
        0.1,
        -2.5,
        1e-7,
        5e-324,
        1e300,
        123456789.125,
        1e17,
    ] {
        let t = score_text(v);
        assert_eq!(t.parse::<f64>().expect("a number"), v, "{t}");
    }
    assert_eq!(score_text(f64::INFINITY), "inf");
    assert_eq!(score_text(f64::NEG_INFINITY), "-inf");
    assert_eq!(score_text(3.0), "3");
}
